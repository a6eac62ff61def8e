"""The transducer head: the loss against a pure-PyTorch forward-backward over the lattice, the
memory budget's split (same loss and gradients), the prediction networks' step = teacher forcing.

Lattice (Graves 2012): nodes (t, u), t < T, u <= U; from (t, u) a blank goes to (t + 1, u), the
label y_{u+1} to (t, u + 1); p(y | x) sums every path from (0, 0) that ends with the blank out of
(T - 1, U). With lp = log_softmax(logits):
    alpha(0, 0) = 0,  alpha(t, u) = logaddexp(alpha(t-1, u) + lp(t-1, u, blank), alpha(t, u-1) + lp(t, u-1, y_u))
    beta(T-1, U) = lp(T-1, U, blank),
    beta(t, u) = logaddexp(beta(t+1, u) + lp(t, u, blank), beta(t, u+1) + lp(t, u, y_{u+1}))
    -log p = -(alpha(T-1, U) + lp(T-1, U, blank)) = -beta(0, 0)
and the gradient of -log p with respect to the logits (the chain through log_softmax):
    d/dz(t, u, k) = softmax(t, u, k) · occ(t, u) - occ(t, u, k),
    occ(t, u, k) = exp(alpha(t, u) + lp(t, u, k) + beta(next(t, u, k)) + log p)  (k blank or y_{u+1}),
    occ(t, u) = Σ_k occ(t, u, k) = exp(alpha(t, u) + beta(t, u) + log p).
"""

from __future__ import annotations

import pytest
import torch

from asr_pe.models.losses import lattice_bytes, lattice_chunks, transducer_loss
from asr_pe.models.transducer import LSTMPredictor, StatelessPredictor, build_transducer

torchaudio_f = pytest.importorskip("torchaudio.functional")

NEG = float("-inf")


def lattice_alpha_beta(lp: torch.Tensor, y: list[int], blank: int = 0):
    """lp (T, U+1, V) float64 -> alpha, beta (T, U+1) by the recursions above (plain loops)."""
    T, U1, _ = lp.shape
    U = U1 - 1
    alpha = torch.full((T, U1), NEG, dtype=lp.dtype)
    beta = torch.full((T, U1), NEG, dtype=lp.dtype)
    for t in range(T):
        for u in range(U1):
            if t == 0 and u == 0:
                alpha[t, u] = 0.0
                continue
            a = alpha[t - 1, u] + lp[t - 1, u, blank] if t > 0 else torch.tensor(NEG, dtype=lp.dtype)
            b = alpha[t, u - 1] + lp[t, u - 1, y[u - 1]] if u > 0 else torch.tensor(NEG, dtype=lp.dtype)
            alpha[t, u] = torch.logaddexp(a, b)
    for t in reversed(range(T)):
        for u in reversed(range(U1)):
            if t == T - 1 and u == U:
                beta[t, u] = lp[t, u, blank]
                continue
            a = beta[t + 1, u] + lp[t, u, blank] if t < T - 1 else torch.tensor(NEG, dtype=lp.dtype)
            b = beta[t, u + 1] + lp[t, u, y[u]] if u < U else torch.tensor(NEG, dtype=lp.dtype)
            beta[t, u] = torch.logaddexp(a, b)
    return alpha, beta


def reference_loss_and_grad(logits: torch.Tensor, y: list[int], blank: int = 0):
    """-log p(y|x) and its gradient wrt logits (T, U+1, V), by forward-backward (no autograd)."""
    lp = torch.log_softmax(logits.double(), dim=-1)
    alpha, beta = lattice_alpha_beta(lp, y, blank)
    T, U1, _ = lp.shape
    log_p = alpha[T - 1, U1 - 1] + lp[T - 1, U1 - 1, blank]
    assert torch.allclose(log_p, beta[0, 0]), "forward and backward disagree on log p"
    occ = torch.zeros_like(lp)  # occ(t, u, k)
    for t in range(T):
        for u in range(U1):
            nxt_blank = beta[t + 1, u] if t < T - 1 else (torch.tensor(0.0, dtype=lp.dtype) if u == U1 - 1 else NEG)
            occ[t, u, blank] = torch.exp(alpha[t, u] + lp[t, u, blank] + nxt_blank - log_p)
            if u < U1 - 1:
                occ[t, u, y[u]] = torch.exp(alpha[t, u] + lp[t, u, y[u]] + beta[t, u + 1] - log_p)
    node = torch.exp(alpha + beta - log_p)  # occ(t, u)
    assert torch.allclose(occ.sum(-1), node, atol=1e-9), "occupancies of a node's arcs sum to its occupancy"
    grad = lp.exp() * node[..., None] - occ
    return -log_p, grad


def brute_force_log_p(logits: torch.Tensor, y: list[int], blank: int = 0) -> torch.Tensor:
    """log Σ over every alignment (T blanks and U labels in any order, ending in a blank)."""
    import itertools

    lp = torch.log_softmax(logits.double(), dim=-1)
    T, U = lp.shape[0], len(y)
    total = []
    for label_frames in itertools.combinations_with_replacement(range(T), U):  # frame of each label, in order
        score, u = 0.0, 0
        for t in range(T):
            while u < U and label_frames[u] == t:
                score = score + lp[t, u, y[u]]
                u += 1
            score = score + lp[t, u, blank]
        total.append(score)
    return torch.logsumexp(torch.stack(total), 0)


def test_forward_backward_equals_brute_force_enumeration():
    torch.manual_seed(0)
    logits, y = torch.randn(4, 3, 5), [3, 1]
    loss, _ = reference_loss_and_grad(logits, y)
    assert torch.allclose(-loss, brute_force_log_p(logits, y))


@pytest.mark.parametrize("blank", [0, 4])
def test_torchaudio_rnnt_loss_equals_lattice_forward_backward(blank):
    """Random logits, a padded batch of different T and U, labels including a repeat: loss and
    gradient of every (t, u, k), the blank's and the labels' included, equal the reference."""
    torch.manual_seed(1)
    V = 6
    frames, labels = [7, 5, 3], [[1, 2, 2, 3], [3, 1], [2, 5, 1, 1]]
    labels = [[k if k != blank else (blank + 1) % V for k in y] for y in labels]
    T, U = max(frames), max(len(y) for y in labels)
    logits = torch.randn(3, T, U + 1, V, requires_grad=True)
    targets = torch.zeros(3, U, dtype=torch.int32)
    for b, y in enumerate(labels):
        targets[b, : len(y)] = torch.tensor(y)
    losses = torchaudio_f.rnnt_loss(logits, targets, torch.tensor(frames, dtype=torch.int32),
                                    torch.tensor([len(y) for y in labels], dtype=torch.int32),
                                    blank=blank, reduction="none")
    losses.sum().backward()
    for b, y in enumerate(labels):
        ref_loss, ref_grad = reference_loss_and_grad(logits[b, : frames[b], : len(y) + 1].detach(), y, blank)
        assert torch.allclose(losses[b].double(), ref_loss, rtol=1e-5, atol=1e-5)
        got = logits.grad[b].double()
        assert torch.allclose(got[: frames[b], : len(y) + 1], ref_grad, atol=1e-5)
        # nodes outside the utterance's lattice get no gradient
        assert float(got[frames[b]:].abs().sum()) == 0 and float(got[:, len(y) + 1:].abs().sum()) == 0
        assert float(ref_grad[..., blank].abs().sum()) > 0  # the blank arcs carry gradient


def tiny_head(predictor="stateless", vocab=7, **kw):
    torch.manual_seed(2)
    return build_transducer(vocab, 8, predictor=predictor, embed_dim=8, joiner_dim=12, lstm_hidden=10,
                            dropout=0.0, **kw).eval()


@pytest.mark.parametrize("predictor", ["stateless", "lstm"])
def test_transducer_loss_is_the_lattice_loss_of_the_joiner(predictor):
    """transducer_loss = mean over utterances of the reference -log p on the head's own logits."""
    head = tiny_head(predictor)
    enc = torch.randn(2, 6, 8)
    lengths = torch.tensor([6, 4])
    tokens = torch.tensor([[1, 2, 3], [4, -1, -1]])
    loss, finite = transducer_loss(head, enc, lengths, tokens, torch.tensor([3, 1]))
    assert finite.all()
    enc_proj, pred_proj = head.project(enc, tokens)
    refs = []
    for b, (t, y) in enumerate([(6, [1, 2, 3]), (4, [4])]):
        logits = head.joiner(enc_proj[b, :t, None], pred_proj[b, None, : len(y) + 1])
        refs.append(reference_loss_and_grad(logits.detach(), y)[0])
    assert torch.allclose(loss.double(), torch.stack(refs).mean(), rtol=1e-5)


def test_budget_splits_the_batch_with_equal_loss_and_gradients():
    head = tiny_head()
    torch.manual_seed(3)
    enc = torch.randn(4, 9, 8, requires_grad=True)
    lengths, tokens = torch.tensor([9, 8, 5, 3]), torch.tensor([[1, 2, 3, 4], [2, 2, -1, -1], [5, -1, -1, -1],
                                                                 [6, 1, 2, -1]])
    token_lengths = (tokens >= 0).sum(1)
    head.train()
    whole, _ = transducer_loss(head, enc, lengths, tokens, token_lengths)
    g_whole = torch.autograd.grad(whole, [enc, *head.parameters()])
    per_node = lattice_bytes(1, 0, 12, 7)
    head.lattice_budget_mb = 2 * 9 * 5 * per_node / 2**20  # two of the longest utterances' lattices
    runs = lattice_chunks(lengths.tolist(), token_lengths.tolist(), 12, 7, head.lattice_budget_mb * 2**20)
    assert runs == [(0, 2), (2, 4)]
    split, _ = transducer_loss(head, enc, lengths, tokens, token_lengths)
    g_split = torch.autograd.grad(split, [enc, *head.parameters()])
    assert torch.allclose(whole, split, rtol=1e-6)
    for a, b in zip(g_whole, g_split):
        assert torch.allclose(a, b, atol=1e-6)


def test_lattice_chunks_respect_the_budget():
    frames, labels = [50, 40, 40, 30, 10, 300], [10, 12, 5, 5, 2, 40]
    budget = 3 * lattice_bytes(50, 12, 16, 30)
    runs = lattice_chunks(frames, labels, 16, 30, budget)
    assert runs[0][0] == 0 and runs[-1][1] == len(frames)
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))  # a partition, in order
    for s, e in runs:
        need = (e - s) * lattice_bytes(max(frames[s:e]), max(labels[s:e]), 16, 30)
        assert need <= budget or e - s == 1  # an utterance over the budget runs alone
    assert (5, 6) in runs
    assert lattice_chunks(frames, labels, 16, 30, None) == [(0, 6)]


def test_loss_is_fp32_under_bf16_autocast():
    head = tiny_head()
    enc, lengths = torch.randn(2, 6, 8), torch.tensor([6, 5])
    tokens, token_lengths = torch.tensor([[1, 2], [3, -1]]), torch.tensor([2, 1])
    ref, _ = transducer_loss(head, enc, lengths, tokens, token_lengths)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, _ = transducer_loss(head, enc, lengths, tokens, token_lengths)
    assert got.dtype == torch.float32
    assert torch.allclose(got, ref, rtol=0.05)  # the joiner in bf16, the loss in fp32


@pytest.mark.parametrize("cls", [StatelessPredictor, LSTMPredictor])
def test_predictor_steps_equal_teacher_forcing(cls):
    """Feeding labels one at a time from the empty state gives the rows of the parallel pass."""
    torch.manual_seed(4)
    pred = cls(9, 8, 3, blank=0) if cls is StatelessPredictor else cls(9, 8, hidden=6, layers=2, blank=0)
    pred.eval()
    y = torch.tensor([[3, 5, 5, 1], [2, 8, 4, 7]])
    full = pred(torch.cat([torch.zeros(2, 1, dtype=torch.long), y], 1))  # (B, U+1, P)
    out, state = pred.start(2, "cpu")
    rows = [out]
    for u in range(y.shape[1]):
        out, state = pred.step(y[:, u], state)
        rows.append(out)
    assert torch.allclose(torch.stack(rows, 1), full, atol=1e-6)


def test_stateless_output_depends_only_on_the_last_context_labels():
    pred = StatelessPredictor(9, 8, context_size=2).eval()
    a = pred(torch.tensor([[0, 1, 2, 3, 4]]))[0, -1]
    b = pred(torch.tensor([[0, 7, 6, 3, 4]]))[0, -1]
    c = pred(torch.tensor([[0, 1, 2, 5, 4]]))[0, -1]
    assert torch.allclose(a, b) and not torch.allclose(a, c)


def test_unknown_options_are_errors():
    with pytest.raises(ValueError, match="predictor"):
        build_transducer(5, 4, predictor="gru")
    with pytest.raises(ValueError, match="unknown option"):
        build_transducer(5, 4, joiner_width=3)
