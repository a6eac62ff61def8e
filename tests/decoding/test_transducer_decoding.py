"""Transducer searches: modified beam search against brute force over every one-symbol-per-frame
path on a tiny vocabulary, greedy batched = one utterance at a time, the per-frame cap, beam 1 =
greedy with one symbol per frame."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from asr_pe.decoding.transducer import transducer_beam, transducer_beam_batch, transducer_greedy
from asr_pe.models.transducer import build_transducer


def head(predictor="stateless", vocab=4, seed=0):
    torch.manual_seed(seed)
    h = build_transducer(vocab, 6, predictor=predictor, embed_dim=8, joiner_dim=10, lstm_hidden=7,
                         dropout=0.0).eval()
    with torch.no_grad():
        h.joiner.out.weight.mul_(4.0)  # peaked distributions: hypotheses differ clearly
    return h


@torch.no_grad()
def step_log_probs(h, enc_t: torch.Tensor, labels: tuple[int, ...]) -> torch.Tensor:
    """log p(. | frame, labels) from the teacher-forced predictor (not the decoder's state code)."""
    tokens = torch.tensor([[h.blank, *labels]])
    g = h.predictor(tokens)[0, -1]  # (P,)
    return torch.log_softmax(h.joiner(h.joiner.enc_proj(enc_t), h.joiner.pred_proj(g)), -1)


def brute_force(h, enc: torch.Tensor) -> dict[tuple[int, ...], float]:
    """Every path of one symbol per frame (V^T): label sequence -> log Σ p(path)."""
    V = h.joiner.out.out_features
    totals: dict[tuple[int, ...], list[float]] = {}
    for path in itertools.product(range(V), repeat=enc.shape[0]):
        labels, score = (), 0.0
        for t, k in enumerate(path):
            score += float(step_log_probs(h, enc[t], labels)[k])
            if k != h.blank:
                labels = labels + (k,)
        totals.setdefault(labels, []).append(score)
    return {k: float(torch.logsumexp(torch.tensor(v), 0)) for k, v in totals.items()}


@pytest.mark.parametrize("predictor", ["stateless", "lstm"])
def test_exhaustive_modified_beam_search_equals_brute_force(predictor):
    h = head(predictor)
    torch.manual_seed(1)
    enc = torch.randn(3, 6)
    exact = brute_force(h, enc)
    got = transducer_beam(h, enc, beam=4 ** 3)  # never prunes
    assert {tuple(l): s for l, s in got} == pytest.approx(exact, abs=1e-4)
    best = max(exact, key=exact.get)
    assert tuple(got[0][0]) == best


@pytest.mark.parametrize("predictor", ["stateless", "lstm"])
def test_beam_one_is_greedy_with_one_symbol_per_frame(predictor):
    h = head(predictor, vocab=5, seed=4)
    torch.manual_seed(5)
    enc = torch.randn(2, 9, 6)
    greedy = transducer_greedy(h, enc, torch.tensor([9, 6]), max_symbols_per_frame=1)
    beam1 = transducer_beam_batch(h, enc, torch.tensor([9, 6]), beam=1)
    assert greedy == beam1


def reference_greedy(h, enc: torch.Tensor, cap: int) -> list[int]:
    labels: tuple[int, ...] = ()
    for t in range(enc.shape[0]):
        for _ in range(cap):
            k = int(step_log_probs(h, enc[t], labels).argmax())
            if k == h.blank:
                break
            labels = labels + (k,)
    return list(labels)


@pytest.mark.parametrize("predictor", ["stateless", "lstm"])
def test_batched_greedy_equals_reference_one_utterance_at_a_time(predictor):
    h = head(predictor, vocab=6, seed=6)
    with torch.no_grad():
        h.joiner.out.bias[h.blank] -= 3.0  # several labels per frame happen
    torch.manual_seed(7)
    enc = torch.randn(3, 8, 6)
    lengths = torch.tensor([8, 5, 2])
    got = transducer_greedy(h, enc, lengths, max_symbols_per_frame=3)
    want = [reference_greedy(h, enc[b, : int(lengths[b])], 3) for b in range(3)]
    assert got == want
    assert any(len(w) > int(n) for w, n in zip(want, lengths))  # more labels than frames: the cap > 1 matters


def test_symbols_per_frame_cap():
    h = head(vocab=5, seed=8)
    with torch.no_grad():
        h.joiner.out.bias[h.blank] = -1e4  # blank never wins: only the cap ends a frame
    enc = torch.randn(2, 4, 6)
    for cap in (1, 2, 5):
        hyps = transducer_greedy(h, enc, torch.tensor([4, 3]), max_symbols_per_frame=cap)
        assert [len(x) for x in hyps] == [4 * cap, 3 * cap]
    beam = transducer_beam(h, enc[0], beam=3)
    assert all(len(labels) == 4 for labels, _ in beam)  # one symbol per frame at most
    assert math.isfinite(beam[0][1])


class LargestTensor(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the most elements of any tensor an operator returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_decoding_never_builds_a_time_by_label_tensor(search):
    """Frame by frame: nothing bigger than the encoder's own projection (T × J) is created, so
    memory does not grow with T × U (a T × U × V lattice here would be 200 × 100+ × 5)."""
    h = head(vocab=5, seed=9)
    with torch.no_grad():
        h.joiner.out.bias[h.blank] -= 2.0  # many labels: U grows with T
    T = 200
    enc = torch.randn(1, T, 6)
    with LargestTensor() as spy:
        if search == "greedy":
            (hyp,) = transducer_greedy(h, enc, torch.tensor([T]), max_symbols_per_frame=2)
        else:
            hyp = transducer_beam(h, enc[0], beam=3)[0][0]
    assert len(hyp) > T // 4  # a long label sequence was decoded
    assert spy.largest <= T * h.joiner.enc_proj.out_features  # the (T, J) projection of the frames, at most
