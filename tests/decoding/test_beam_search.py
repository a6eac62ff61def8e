"""Attention beam search over a step function, alone and joint with CTC.

The toy decoder is a fixed random second-order Markov table over tokens,
p(y_i | y_{i-2}, y_{i-1}) = table[y_{i-2}, y_{i-1}], so the teacher-forced log-likelihood of
any sequence is known exactly and an exhaustive search can be done by enumeration.
"""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from asr_pe.decoding.beam_search import beam_search, greedy_search, reorder_state
from asr_pe.decoding.ctc_prefix_score import CTCPrefixScorer


class MarkovDecoder:
    """Step function of a second-order Markov table; the state caches the tokens it saw.

    The state check proves the search hands back the state of each survivor's own parent.
    """

    def __init__(self, vocab, seed, eos_bias=0.0, sharp=1.5):
        g = torch.Generator().manual_seed(seed)
        logits = sharp * torch.randn(vocab, vocab, vocab, generator=g, dtype=torch.float64)
        logits[..., -1] += eos_bias  # the last id is sos = eos
        self.table = logits.log_softmax(-1)  # (V, V, V)
        self.calls = 0

    def __call__(self, tokens, state):
        self.calls += 1
        if state is not None:
            assert torch.equal(state["seen"], tokens[:, :-1]), "state does not follow its hypothesis"
        prev2 = tokens[:, -2] if tokens.shape[1] > 1 else tokens[:, -1]
        return self.table[prev2, tokens[:, -1]], {"seen": tokens.clone()}

    def log_likelihood(self, ids, sos, eos):
        """Teacher-forced sum of step log-probs of [sos] + ids -> ids + [eos]."""
        seq = [sos] + list(ids) + [eos]
        total = 0.0
        for i in range(1, len(seq)):
            log_probs, _ = self(torch.tensor([seq[:i]]), None)
            total += float(log_probs[0, seq[i]])
        return total


V, SOS, EOS = 6, 5, 5


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("end_detect", [True, False])
def test_beam_one_equals_greedy(seed, end_detect):
    dec = MarkovDecoder(V, seed)
    greedy = greedy_search(dec, sos=SOS, eos=EOS, max_len=12)
    best = beam_search(dec, sos=SOS, eos=EOS, beam=1, max_len=12, end_detect=end_detect)[0]
    assert best.ids == greedy.ids
    assert best.components["total"] == pytest.approx(greedy.components["total"], abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_hypothesis_score_is_teacher_forced_log_likelihood(seed):
    dec = MarkovDecoder(V, seed)
    hyps = beam_search(dec, sos=SOS, eos=EOS, beam=4, max_len=10, length_alpha=1.0)
    assert len(hyps) == 4
    for h in hyps:
        assert SOS not in h.ids and EOS not in h.ids
        ll = dec.log_likelihood(h.ids, SOS, EOS)
        assert h.components["total"] == pytest.approx(ll, abs=1e-9)
        assert h.components["att"] == pytest.approx(ll, abs=1e-9)
        assert h.components["length"] == len(h.ids) + 1
        assert h.score == pytest.approx(ll / (len(h.ids) + 1), abs=1e-9)  # per-token average
    assert [h.score for h in hyps] == sorted([h.score for h in hyps], reverse=True)
    g = greedy_search(dec, sos=SOS, eos=EOS, max_len=10)
    assert g.components["total"] == pytest.approx(dec.log_likelihood(g.ids, SOS, EOS), abs=1e-9)


def test_wide_beam_is_exhaustive_search():
    # Labels {0, 1, 2}, eos = 3, max_len 3: 1 + 3 + 9 + 27 = 40 sequences. A beam larger than
    # the candidate set keeps everything, so every sequence ends once with its exact score.
    vocab, eos = 4, 3
    dec = MarkovDecoder(vocab, seed=11)
    hyps = beam_search(dec, sos=eos, eos=eos, beam=200, max_len=3, end_detect=False, length_alpha=0.0)
    found = {tuple(h.ids): h.components["total"] for h in hyps}
    expected = {
        seq: dec.log_likelihood(seq, eos, eos) for n in range(4) for seq in itertools.product(range(3), repeat=n)
    }
    assert set(found) == set(expected)
    for seq, ll in expected.items():
        assert found[seq] == pytest.approx(ll, abs=1e-9)
    best = max(expected, key=expected.get)
    assert tuple(hyps[0].ids) == best  # length_alpha = 0: ranking by the raw total


@pytest.mark.parametrize("seed", range(8))
def test_larger_beam_never_worse_than_beam_one(seed):
    # Not a theorem for beam search in general; checked on these fixed tables with end
    # detection off and ranking by the unnormalised total.
    dec = MarkovDecoder(V, seed, eos_bias=0.5)
    one = beam_search(dec, sos=SOS, eos=EOS, beam=1, max_len=8, end_detect=False, length_alpha=0.0)[0]
    for width in (2, 4, 8):
        wide = beam_search(dec, sos=SOS, eos=EOS, beam=width, max_len=8, end_detect=False, length_alpha=0.0)[0]
        assert wide.components["total"] >= one.components["total"] - 1e-12


def test_end_detection_stops_early_without_changing_the_best():
    # sos -> 1 -> eos is almost certain; every other token costs ~log(1e-6) per step, so the
    # hypotheses that end later are hopeless (more than 10 nats below the best).
    table = torch.full((V, V, V), 1e-6, dtype=torch.float64)
    table[:, SOS, 1] = 1.0
    table[:, 1, EOS] = 1.0
    table[:, :, EOS] += 0.3  # ending is always reasonably likely relative to continuing
    dec = MarkovDecoder(V, seed=0)
    dec.table = (table / table.sum(-1, keepdim=True)).log()
    with_end = beam_search(dec, sos=SOS, eos=EOS, beam=3, max_len=40, end_detect=True)
    calls_with_end = dec.calls
    dec.calls = 0
    without_end = beam_search(dec, sos=SOS, eos=EOS, beam=3, max_len=40, end_detect=False)
    assert with_end[0].ids == without_end[0].ids == [1]
    assert calls_with_end < 10 < dec.calls


def test_end_detection_needs_m_hopeless_lengths_in_a_row():
    # [] ends first (log 0.4); [1] ends hopelessly (~log 1e-9) at length 2; [1, 2] then ends
    # with log 0.6, the best. One hopeless length out of M = 3 must not stop the search.
    table = torch.full((V, V, V), 1e-12, dtype=torch.float64)
    table[:, SOS, 1], table[:, SOS, EOS] = 0.6, 0.4
    table[SOS, 1, 2], table[SOS, 1, EOS] = 1.0, 1e-9
    table[1, 2, EOS] = 1.0
    dec = MarkovDecoder(V, seed=0)
    dec.table = (table / table.sum(-1, keepdim=True)).log()
    hyps = beam_search(dec, sos=SOS, eos=EOS, beam=3, max_len=20, end_detect=True, length_alpha=0.0)
    assert hyps[0].ids == [1, 2]
    assert hyps[0].components["total"] == pytest.approx(math.log(0.6), abs=1e-6)


def test_max_len_from_encoder_length_and_min_len():
    dec = MarkovDecoder(V, seed=2, eos_bias=-30.0)  # eos essentially never chosen
    hyps = beam_search(dec, sos=SOS, eos=EOS, beam=2, encoder_length=7, max_len_ratio=0.5)
    assert all(len(h.ids) == 3 for h in hyps)  # max_len = int(0.5 * 7) = 3, then eos forced
    assert hyps[0].components["total"] == pytest.approx(dec.log_likelihood(hyps[0].ids, SOS, EOS), abs=1e-9)
    dec = MarkovDecoder(V, seed=2, eos_bias=30.0)  # eos essentially always chosen
    hyps = beam_search(dec, sos=SOS, eos=EOS, beam=3, max_len=10, min_len=2)
    assert all(len(h.ids) >= 2 for h in hyps)
    with pytest.raises(ValueError, match="max_len"):
        beam_search(dec, sos=SOS, eos=EOS)


# ---------------------------------------------------------------- joint CTC/attention


def ctc_log_prob(log_probs, ids):
    """log p_ctc(ids | x) from torch's CTC loss."""
    return -float(
        F.ctc_loss(
            log_probs[:, None, :],
            torch.tensor([ids], dtype=torch.long).reshape(1, -1),
            torch.tensor([log_probs.shape[0]]),
            torch.tensor([len(ids)]),
            reduction="sum",
        )
    )


def random_ctc(frames, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    return (2.0 * torch.randn(frames, vocab, generator=g, dtype=torch.float64)).log_softmax(-1)


@pytest.mark.parametrize("seed", range(3))
def test_joint_with_zero_ctc_weight_equals_attention_only(seed):
    dec = MarkovDecoder(V, seed)
    ctc = CTCPrefixScorer(random_ctc(10, V, seed), blank=0, eos=EOS)
    att_only = beam_search(dec, sos=SOS, eos=EOS, beam=4, max_len=10)
    joint = beam_search(dec, sos=SOS, eos=EOS, beam=4, max_len=10, ctc_scorer=ctc, ctc_weight=0.0)
    assert [h.ids for h in joint] == [h.ids for h in att_only]
    assert [h.score for h in joint] == pytest.approx([h.score for h in att_only], abs=1e-12)
    for h in joint:  # the CTC component is still the full-sequence CTC probability
        assert h.components["ctc"] == pytest.approx(ctc_log_prob(ctc.x, h.ids), abs=1e-8)


@pytest.mark.parametrize("weight", [0.3, 0.7])
def test_joint_total_is_weighted_sum_of_attention_and_ctc(weight):
    dec = MarkovDecoder(V, seed=5)
    log_probs = random_ctc(8, V, 5)
    ctc = CTCPrefixScorer(log_probs, blank=0, eos=EOS)
    hyps = beam_search(dec, sos=SOS, eos=EOS, beam=4, ctc_scorer=ctc, ctc_weight=weight)
    assert hyps
    for h in hyps:
        att = dec.log_likelihood(h.ids, SOS, EOS)
        ctc_lp = ctc_log_prob(log_probs, h.ids)
        assert h.components["att"] == pytest.approx(att, abs=1e-9)
        assert h.components["ctc"] == pytest.approx(ctc_lp, abs=1e-8)
        assert h.components["total"] == pytest.approx((1 - weight) * att + weight * ctc_lp, abs=1e-8)
        assert len(h.ids) <= 8  # max_len defaults to the CTC frame count


def test_strong_ctc_overrides_an_uninformative_attention_decoder():
    # Attention: almost uniform. CTC: peaked on the frame path 2 2 0 3 0 0 3 1 -> labels [2, 3, 3, 1].
    dec = MarkovDecoder(V, seed=9, sharp=0.05)
    path = torch.tensor([2, 2, 0, 3, 0, 0, 3, 1])
    log_probs = (F.one_hot(path, V).double() * 8.0).log_softmax(-1)
    ctc = CTCPrefixScorer(log_probs, blank=0, eos=EOS)
    hyps = beam_search(dec, sos=SOS, eos=EOS, beam=5, ctc_scorer=ctc, ctc_weight=0.8, pre_beam_ratio=2.0)
    assert hyps[0].ids == [2, 3, 3, 1]
    with pytest.raises(ValueError, match="ctc_scorer"):
        beam_search(dec, sos=SOS, eos=EOS, max_len=5, ctc_weight=0.3)


# ---------------------------------------------------------------- plumbing


def test_reorder_state_follows_nested_containers():
    from collections import namedtuple

    Cache = namedtuple("Cache", "keys values")
    state = {"layers": [Cache(torch.arange(4), torch.arange(4) * 10)], "memory": torch.arange(8).view(4, 2)}
    picked = reorder_state(state, torch.tensor([2, 2, 0]))
    assert picked["layers"][0].keys.tolist() == [2, 2, 0]
    assert picked["layers"][0].values.tolist() == [20, 20, 0]
    assert picked["memory"].tolist() == [[4, 5], [4, 5], [0, 1]]
    with pytest.raises(TypeError, match="reorder="):
        reorder_state(object(), torch.tensor([0]))


def test_step_function_with_wrong_shape_is_reported():
    def bad_step(tokens, state):
        return torch.zeros(tokens.shape[0] + 1, V), None

    with pytest.raises(ValueError, match="step_fn"):
        beam_search(bad_step, sos=SOS, eos=EOS, max_len=3)
    assert math.isfinite(greedy_search(MarkovDecoder(V, 0), sos=SOS, eos=EOS, max_len=3).score)
