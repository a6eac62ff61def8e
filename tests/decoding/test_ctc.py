"""CTC decoding: greedy, prefix beam search, the prefix scorer and the LM-fusion wrapper.

Ground truth is the definition of CTC: p(l | x) = sum over frame paths pi with B(pi) = l of
prod_t x_t(pi_t), where B collapses repeats then removes blanks. For tiny T and V it is
computed by enumerating all V^T paths.
"""

import itertools
import math
import sys

import pytest
import torch
import torch.nn.functional as F

from asr_pe.decoding.ctc import ctc_beam_batch, ctc_greedy, ctc_prefix_beam_search
from asr_pe.decoding.ctc_prefix_score import CTCPrefixScorer
from asr_pe.decoding import lm_fusion


def collapse(path, blank=0):
    return tuple(k for k, _ in itertools.groupby(path) if k != blank)


def brute_force_labellings(log_probs, blank=0):
    """{labelling: p(labelling | x)} by summing over all V^T frame paths."""
    probs = log_probs.double().exp()
    frames, vocab = probs.shape
    total = {}
    for path in itertools.product(range(vocab), repeat=frames):
        p = math.prod(float(probs[t, k]) for t, k in enumerate(path))
        label = collapse(path, blank)
        total[label] = total.get(label, 0.0) + p
    return total


def ctc_nll(log_probs, labels, blank=0):
    """-log p(labels | x) from torch's CTC loss (T, V) -> float."""
    return float(
        F.ctc_loss(
            log_probs.double()[:, None, :],
            torch.tensor([list(labels)], dtype=torch.long).reshape(1, -1),
            torch.tensor([log_probs.shape[0]]),
            torch.tensor([len(labels)]),
            blank=blank,
            reduction="sum",
            zero_infinity=False,
        )
    )


def random_log_probs(frames, vocab, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(frames, vocab, generator=g, dtype=torch.float64)).log_softmax(-1)


# ---------------------------------------------------------------- greedy


def test_greedy_collapses_repeats_drops_blanks_and_respects_lengths():
    # argmax paths: utt 0 = [1, 1, 0, 1, 2, 2, 0, 3], utt 1 = [2, 0, 2, 2, 3, 3, 3, 1] cut at 5 frames
    paths = torch.tensor([[1, 1, 0, 1, 2, 2, 0, 3], [2, 0, 2, 2, 3, 3, 3, 1]])
    log_probs = F.one_hot(paths, 4).float().mul(5.0).log_softmax(-1)  # (2, 8, 4)
    hyps = ctc_greedy(log_probs, torch.tensor([8, 5]), blank=0)
    assert hyps == [[1, 1, 2, 3], [2, 2, 3]]
    # Blank at another index: the same path with blank=3 keeps the zeros as labels.
    assert ctc_greedy(log_probs[:1], None, blank=3) == [[1, 0, 1, 2, 0]]
    assert ctc_greedy(log_probs, torch.tensor([0, 1])) == [[], [2]]


def test_greedy_rejects_bad_input():
    with pytest.raises(ValueError, match="B, T, V"):
        ctc_greedy(torch.zeros(5, 4))
    with pytest.raises(ValueError, match="lengths"):
        ctc_greedy(torch.zeros(2, 5, 4), torch.tensor([6, 1]))


# ---------------------------------------------------------------- prefix beam search


def test_prefix_beam_beats_best_path_by_summing_paths():
    # Two frames, p(blank) = 0.6, p(a) = 0.4 each. Best path (blank, blank) -> "" with 0.36,
    # but "a" collects (a,a) + (a,blank) + (blank,a) = 0.16 + 0.24 + 0.24 = 0.64.
    log_probs = torch.tensor([[0.6, 0.4], [0.6, 0.4]], dtype=torch.float64).log()
    assert ctc_greedy(log_probs[None]) == [[]]
    results = ctc_prefix_beam_search(log_probs, beam=4)
    assert results[0][0] == [1]
    assert results[0][1] == pytest.approx(math.log(0.64), abs=1e-9)
    assert results[1][0] == []
    assert results[1][1] == pytest.approx(math.log(0.36), abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prefix_beam_scores_equal_brute_force_total_probability(seed):
    log_probs = random_log_probs(5, 3, seed)  # 3^5 = 243 paths
    truth = brute_force_labellings(log_probs)
    # A beam wide enough to hold every prefix makes the search exhaustive and exact.
    results = ctc_prefix_beam_search(log_probs, beam=len(truth))
    assert len(results) == len(truth)
    for ids, score in results:
        assert score == pytest.approx(math.log(truth[tuple(ids)]), abs=1e-9)
        assert score == pytest.approx(-ctc_nll(log_probs, ids), abs=1e-9)
    best = max(truth, key=truth.get)
    assert tuple(results[0][0]) == best
    # Results come sorted best first.
    narrow = ctc_prefix_beam_search(log_probs, beam=3)
    assert [s for _, s in narrow] == sorted([s for _, s in narrow], reverse=True)


def test_prefix_beam_handles_repeated_labels():
    # "a a" needs a blank between the two a's; "a" alone absorbs (a, a) paths.
    log_probs = random_log_probs(4, 2, seed=7)
    truth = brute_force_labellings(log_probs)
    scores = dict((tuple(ids), s) for ids, s in ctc_prefix_beam_search(log_probs, beam=10))
    assert scores[(1, 1)] == pytest.approx(math.log(truth[(1, 1)]), abs=1e-9)
    assert scores[(1,)] == pytest.approx(math.log(truth[(1,)]), abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_beam_one_equals_greedy_on_peaked_posteriors(seed):
    g = torch.Generator().manual_seed(seed)
    paths = torch.randint(0, 6, (1, 30), generator=g)
    logits = F.one_hot(paths, 6).double() * 12.0 + 0.1 * torch.randn(1, 30, 6, generator=g, dtype=torch.float64)
    log_probs = logits.log_softmax(-1)
    greedy = ctc_greedy(log_probs)[0]
    assert ctc_prefix_beam_search(log_probs[0], beam=1)[0][0] == greedy
    assert ctc_prefix_beam_search(log_probs[0], beam=8)[0][0] == greedy
    # Pruning unlikely tokens does not change a peaked decode.
    assert ctc_prefix_beam_search(log_probs[0], beam=8, topk=2)[0][0] == greedy
    assert ctc_prefix_beam_search(log_probs[0], beam=8, prune=math.log(1e-3))[0][0] == greedy


def test_beam_batch_respects_lengths():
    log_probs = torch.stack([random_log_probs(6, 4, 1), random_log_probs(6, 4, 2)])  # (2, 6, 4)
    batch = ctc_beam_batch(log_probs, torch.tensor([6, 3]), beam=5)
    assert batch[0] == ctc_prefix_beam_search(log_probs[0], beam=5)
    assert batch[1] == ctc_prefix_beam_search(log_probs[1, :3], beam=5)


def test_prefix_beam_rejects_bad_input():
    with pytest.raises(ValueError, match="T, V"):
        ctc_prefix_beam_search(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="beam"):
        ctc_prefix_beam_search(torch.zeros(3, 4), beam=0)
    assert ctc_prefix_beam_search(torch.zeros(0, 4)) == [([], 0.0)]


# ---------------------------------------------------------------- prefix scorer


def score_sequence(scorer, labels):
    """Extend the empty prefix label by label, then score eos: returns (prefix psi's, full)."""
    state = scorer.initial_state()
    prefix_scores = []
    for label in labels:
        scores, states = scorer.score(state, torch.tensor([label]))
        prefix_scores.append(float(scores[0]))
        state = states[0]
    full, _ = scorer.score(state, torch.tensor([scorer.eos]))
    return prefix_scores, float(full[0]), state


@pytest.mark.parametrize("use_reference", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prefix_scorer_full_sequence_equals_ctc_loss(seed, use_reference):
    eos = 5
    log_probs = random_log_probs(12, 6, seed, scale=2.0)  # (T, V); column 5 doubles as eos
    scorer = CTCPrefixScorer(log_probs, blank=0, eos=eos, use_reference=use_reference)
    for labels in ([], [1], [2, 2], [1, 2, 1], [3, 3, 3, 4], [4, 1, 4, 2, 2, 3]):
        _, full, state = score_sequence(scorer, labels)
        assert full == pytest.approx(-ctc_nll(log_probs, labels), abs=1e-8), labels
        assert scorer.full_sequence_score(state) == pytest.approx(full, abs=1e-12)


@pytest.mark.parametrize("use_reference", [False, True])
def test_prefix_scorer_prefix_probability_equals_sum_over_continuations(use_reference):
    # psi(h) = sum over all labellings l that start with h of p(l | x).
    log_probs = random_log_probs(5, 4, seed=3)  # 4^5 = 1024 paths; labels 1..3 (3 is eos too)
    truth = brute_force_labellings(log_probs)
    scorer = CTCPrefixScorer(log_probs, blank=0, eos=None, use_reference=use_reference)
    for prefix in ([1], [2, 1], [1, 1], [3, 2, 3], [1, 2, 1, 2], [2, 2, 2]):
        psi, _, _ = score_sequence_no_eos(scorer, prefix)
        expected = sum(p for l, p in truth.items() if l[: len(prefix)] == tuple(prefix))
        assert psi == pytest.approx(math.log(expected), abs=1e-9), prefix


def score_sequence_no_eos(scorer, labels):
    state = scorer.initial_state()
    psi = 0.0
    for label in labels:
        scores, states = scorer.score(state, torch.tensor([label]))
        psi, state = float(scores[0]), states[0]
    return psi, None, state


def test_prefix_scorer_batch_matches_single_and_blank_is_excluded():
    log_probs = random_log_probs(9, 5, seed=4)
    scorer = CTCPrefixScorer(log_probs, blank=0, eos=4)
    root = scorer.initial_state()
    _, children = scorer.score(root, torch.tensor([1, 2]))
    candidates = torch.tensor([[0, 1, 2, 4], [2, 3, 1, 4]])
    batch_scores, batch_states = scorer.score_batch(children, candidates)
    for n, child in enumerate(children):
        single, states = scorer.score(child, candidates[n])
        assert torch.allclose(batch_scores[n], single)
        assert all(torch.equal(a.r, b.r) for a, b in zip(batch_states[n], states))
    assert batch_scores[0, 0] == float("-inf")  # blank is not a label
    # eos after [1] is the full-sequence probability of [1].
    assert float(batch_scores[0, 3]) == pytest.approx(-ctc_nll(log_probs, [1]), abs=1e-9)
    with pytest.raises(ValueError, match="one length"):
        scorer.score_batch([root, children[0]], torch.tensor([[1], [2]]))


@pytest.mark.parametrize("peaked", [False, True])
def test_prefix_scorer_vectorised_path_equals_reference_recursion(peaked):
    # Long utterance, float32-like peaked posteriors with exact zeros (-inf) in places.
    frames, vocab = 200, 7
    log_probs = random_log_probs(frames, vocab, seed=6, scale=8.0 if peaked else 1.0)
    log_probs[50:60, 3] = float("-inf")
    fast = CTCPrefixScorer(log_probs, blank=0, eos=6)
    slow = CTCPrefixScorer(log_probs, blank=0, eos=6, use_reference=True)
    g = torch.Generator().manual_seed(0)
    states_fast, states_slow = [fast.initial_state()] * 2, [slow.initial_state()] * 2
    for _ in range(12):
        cand = torch.randint(0, vocab, (2, 4), generator=g)
        s_fast, new_fast = fast.score_batch(states_fast, cand)
        s_slow, new_slow = slow.score_batch(states_slow, cand)
        finite = torch.isfinite(s_slow)
        assert torch.allclose(s_fast[finite], s_slow[finite], rtol=0, atol=1e-7)
        assert (s_fast[~finite] < -5e3).all()  # zero probability (or the e^-10000 floor)
        for a, b in zip(sum(new_fast, []), sum(new_slow, [])):
            ok = torch.isfinite(b.r)
            assert torch.allclose(a.r[ok], b.r[ok], rtol=0, atol=1e-7)
        pick = [(i, int(torch.argmax(torch.where(cand[i] == 0, -1e9, s_slow[i])))) for i in range(2)]
        states_fast = [new_fast[i][j] for i, j in pick]
        states_slow = [new_slow[i][j] for i, j in pick]


def test_prefix_scorer_too_many_labels_is_impossible():
    log_probs = random_log_probs(3, 4, seed=5)
    scorer = CTCPrefixScorer(log_probs, blank=0, eos=3)
    psi, _, _ = score_sequence_no_eos(scorer, [1, 2, 1])
    assert psi == pytest.approx(-ctc_nll(log_probs, [1, 2, 1]), abs=1e-9)  # T labels: one path, ends there
    _, _, state = score_sequence_no_eos(scorer, [1, 2, 1])
    scores, _ = scorer.score(state, torch.tensor([2, 3]))
    assert scores[0] == float("-inf")  # a 4th label in 3 frames
    # [1, 1] needs 3 frames (a blank between); [1, 1, 1] would need 5.
    _, full, _ = score_sequence(scorer, [1, 1, 1])
    assert full == float("-inf")


# ---------------------------------------------------------------- LM fusion


def hide_flashlight(monkeypatch):
    for name in ("flashlight", "flashlight.lib", "flashlight.lib.text", "flashlight.lib.text.decoder"):
        monkeypatch.setitem(sys.modules, name, None)  # a None entry makes ``import`` fail


def test_lm_fusion_without_flashlight_raises_clear_error(monkeypatch):
    hide_flashlight(monkeypatch)
    with pytest.raises(lm_fusion.LMFusionUnavailable, match="pip install flashlight-text"):
        lm_fusion.build_lm_decoder(["<blank>", " ", "a"], lm_path=None)
    assert issubclass(lm_fusion.LMFusionUnavailable, ImportError)


def flashlight_available():
    try:
        import flashlight.lib.text.decoder  # noqa: F401
    except ImportError:
        return False
    return True


needs_flashlight = pytest.mark.skipif(not flashlight_available(), reason="flashlight-text not installed (extra 'lm')")


@needs_flashlight
def test_lm_fusion_lexicon_free_without_lm_matches_greedy_on_peaked_input():
    tokens = ["<blank>", " ", "a", "b", "<sos/eos>"]
    paths = torch.tensor([[2, 2, 0, 3, 1, 2, 0, 2, 3, 3]])
    log_probs = (F.one_hot(paths, 5).float() * 10.0).log_softmax(-1)  # (1, 10, 5)
    decoder = lm_fusion.build_lm_decoder(tokens, beam=5)
    assert decoder.decode(log_probs) == ctc_greedy(log_probs)  # [a, b, " ", a, a, b]: no end separators here
    assert decoder.decode(log_probs, torch.tensor([4])) == [[2, 3]]


@needs_flashlight
def test_lm_fusion_bigram_lm_flips_an_ambiguous_decision(tmp_path):
    # Acoustics slightly prefer "ba"; the LM strongly prefers the word "ab".
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(
        "\n\\data\\\nngram 1=5\nngram 2=2\n\n\\1-grams:\n-0.30103\t</s>\t0\n-99\t<s>\t-0.3\n"
        "-0.30103\tab\t-0.3\n-3.0\tba\t-0.3\n-2.0\t<unk>\t0\n\n\\2-grams:\n-0.1\t<s> ab\n-0.1\tab </s>\n\n\\end\\\n"
    )
    lexicon = tmp_path / "lexicon.txt"
    lexicon.write_text("ab a b\nba b a\n")
    tokens = ["<blank>", " ", "a", "b", "<sos/eos>"]
    p = torch.full((1, 6, 5), 0.02)
    p[0, :, 0] = 0.5
    p[0, 1, :4] = torch.tensor([0.1, 0.02, 0.4, 0.45])
    p[0, 3, :4] = torch.tensor([0.1, 0.02, 0.45, 0.4])
    log_probs = (p / p.sum(-1, keepdim=True)).log()
    no_lm = lm_fusion.build_lm_decoder(tokens, str(arpa), str(lexicon), lm_weight=0.0, beam=20)
    with_lm = lm_fusion.build_lm_decoder(tokens, str(arpa), str(lexicon), lm_weight=2.0, beam=20)
    assert no_lm.decode(log_probs) == [[3, 2]]
    assert with_lm.decode(log_probs) == [[2, 3]]
    with pytest.raises(ValueError, match="lm_path"):
        lm_fusion.build_lm_decoder(tokens, str(lexicon))  # not an ARPA file
