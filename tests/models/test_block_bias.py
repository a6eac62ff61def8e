"""The blocked learned-bias path (``attention_fast_paths.SDPAWithBlockBias`` with a PE's
``BlockBias``: T5, ALiBi with a learned scale, Shaw, Transformer-XL relative) computes the
reference path's function, outputs and gradients:

* each layout's blocks are the slices of the PE's own ``logits_bias``, and the gradients it adds
  from block score-gradients are autograd's through ``logits_bias`` (any query range against any
  key range, blocks and key counts that divide nothing);
* one attention layer and whole encoders: blocked path = reference path (``use_reference``), padded
  batches, T prime, blocks of 16 rows with a ragged last one, causal too; the path is taken, and
  a batch whose padding is not a suffix falls back to the other paths, same results.
"""

import pytest
import torch

from asr_pe.models import attention_fast_paths as fast_paths, build_encoder
from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.base import offset_rows
from asr_pe.models.positional.relative import rel_shift

D, H = 16, 4
PES = {
    "t5": "t5",
    "t5_causal": {"attention": {"name": "t5", "causal": True}},
    "alibi_learned": {"attention": {"name": "alibi", "learned_scale": True}},
    "shaw": "shaw",
    "shaw_k3_clip": {"attention": {"name": "shaw", "max_distance": 3}},
    "shaw_k3_zero": {"attention": {"name": "shaw", "max_distance": 3, "beyond": "zero"}},
    "relative": "relative",
}


@pytest.fixture(autouse=True)
def blocked_from_any_length(monkeypatch):
    """The blocked path from the first key (in training it starts at ``BLOCK_BIAS_MIN_KEYS``)."""
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_MIN_KEYS", 0)


def hook(spec, causal=False):
    torch.manual_seed(0)
    pe = build_positional(spec, d_model=D, n_heads=H, n_layers=1, causal=causal).layer(0)
    with torch.no_grad():  # ALiBi's learned scale away from 1, so its gradient is not trivial
        for p in pe.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return pe


def test_offset_rows_is_the_transpose_of_rel_shift():
    x = torch.randn(2, 3, 5, 5 + 7 - 1, requires_grad=True)
    g = torch.randn(2, 3, 5, 7)
    (rel_shift(x, 7) * g).sum().backward()
    torch.testing.assert_close(offset_rows(g, 11), x.grad)


@pytest.mark.parametrize("q_range,k_range", [((0, 23), (0, 23)), ((3, 10), (0, 12)), ((0, 5), (0, 31)), ((40, 47), (0, 9))])
@pytest.mark.parametrize("name", list(PES))
def test_blocks_are_slices_of_the_bias_and_their_gradients_autograds(name, q_range, k_range):
    pe = hook(PES[name])
    B, d = 2, D // H
    q = torch.randn(B, H, q_range[1] - q_range[0], d, requires_grad=True)
    q_pos, k_pos = torch.arange(*q_range), torch.arange(*k_range)
    Tq, Tk = q_pos.numel(), k_pos.numel()
    bias = pe.logits_bias(q, q_pos, k_pos).expand(B, H, Tq, Tk)
    layout = pe.block_bias(q, q_pos, k_pos)
    assert layout is not None
    g = torch.randn(B, H, Tq, Tk)
    grads = [torch.zeros_like(t) if t.requires_grad else None for t in layout.inputs]
    for b in range(B):
        for n in (Tk, max(1, Tk - 4)):  # all keys, and an utterance with fewer real keys
            torch.testing.assert_close(layout.full(b, n, 3)[0], bias[b, :, :, :n])
        for s, e in ((0, min(Tq, 4)), (min(Tq, 4), Tq), (Tq // 3, Tq)):
            if e > s:
                torch.testing.assert_close(layout.block(b, s, e, Tk)[0], bias[b, :, s:e])
                for n in (Tk, max(1, Tk - 4)):  # written into a NaN buffer: every entry is written
                    out = torch.full((1, H, e - s, n + 2), float("nan"))[..., 1:n + 1]  # strided, as a slice
                    layout.write_block(out, b, s, e, n)
                    torch.testing.assert_close(out[0], bias[b, :, s:e, :n])
        for s in range(0, Tq, 3):  # the blocked sum of d_s = g over every block of 3 rows
            e = min(Tq, s + 3)
            layout.add_block_grad(grads, b, s, e, Tk, g[b:b + 1, :, s:e])
    got = [t for t in grads if t is not None]
    assert len(got) >= 1 and len(got) == sum(t.requires_grad for t in layout.inputs)
    # through the compact tensors down to q and the PE's parameters = autograd through logits_bias
    params = [q] + list(pe.parameters())
    ref = torch.autograd.grad((bias * g).sum(), params, allow_unused=True)
    fast = torch.autograd.grad([t for t in layout.inputs if t.requires_grad], params, got, allow_unused=True)
    assert sum(w is not None for w in ref) >= 1
    for a, w in zip(fast, ref):
        assert (a is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(a, w, atol=1e-5, rtol=1e-5)


def _count_blocked(monkeypatch):
    calls = []
    orig = fast_paths.SDPAWithBlockBias.apply
    monkeypatch.setattr(fast_paths.SDPAWithBlockBias, "apply", lambda *a: calls.append(a[5]) or orig(*a))
    return calls


@pytest.mark.parametrize("lengths", [[23, 17, 5], [23, 23, 23]], ids=["padded", "full"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", list(PES))
def test_layer_blocked_equals_reference(name, causal, lengths, monkeypatch):
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_ELEMENTS", 1)  # 16-row blocks: 23 = 16 + 7
    calls = _count_blocked(monkeypatch)
    pe = hook(PES[name], causal)
    torch.manual_seed(1)
    mha = MultiHeadAttention(D, H)
    x = torch.randn(3, 23, D, requires_grad=True)
    pad = make_pad_mask(torch.tensor(lengths), 23)
    fast, _ = mha(x, pad, pe=pe, causal=causal)
    assert calls == [lengths], "the blocked path was not taken (or not per utterance)"
    mha.use_reference = True
    ref, _ = mha(x, pad, pe=pe, causal=causal)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)  # every row, padded ones too
    w = torch.randn_like(ref)
    params = [x] + list(pe.parameters()) + list(mha.parameters())
    g_fast = torch.autograd.grad((fast * w).sum(), params)
    g_ref = torch.autograd.grad((ref * w).sum(), params)
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["t5", "shaw", "relative"])
def test_padding_that_is_not_a_suffix_falls_back(name, monkeypatch):
    calls = _count_blocked(monkeypatch)
    pe = hook(PES[name])
    mha = MultiHeadAttention(D, H)
    x = torch.randn(2, 13, D, requires_grad=True)
    pad = make_pad_mask(torch.tensor([13, 9]), 13).flip(-1)  # the second utterance padded at the front
    fast, _ = mha(x, pad, pe=pe)
    assert calls == []
    mha.use_reference = True
    ref, _ = mha(x, pad, pe=pe)
    torch.testing.assert_close(fast[0], ref[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast[1, 4:], ref[1, 4:], atol=1e-5, rtol=1e-5)


def test_when_the_blocked_path_applies():
    q_pos = k_pos = torch.arange(9)
    q = torch.randn(2, H, 9, D // H)
    pick = fast_paths.block_bias_for
    assert pick(hook("t5"), q, q_pos, k_pos, None, "auto", 0.0) is not None
    assert pick(hook("t5"), q, q_pos, k_pos, None, "auto", 0.1) is None  # attention dropout: explicit path
    assert pick(hook("t5"), q, q_pos, k_pos, None, "sdpa", 0.0) is None
    assert pick(hook("alibi"), q, q_pos, k_pos, None, "auto", 0.0) is None  # nothing learned: SDPA's backward
    assert pick(hook("rope"), q, q_pos, k_pos, None, "auto", 0.0) is None  # no bias
    assert pick(hook("shaw"), q, torch.tensor([0, 2, 4, 6, 8, 10, 12, 14, 16]), k_pos, None, "auto", 0.0) is None
    with torch.no_grad():  # inference: SDPA with the bias as a float mask
        assert pick(hook("t5"), q, q_pos, k_pos, None, "auto", 0.0) is None
    fast_paths.BLOCK_BIAS_MIN_KEYS = 10  # fewer keys: the explicit path (restored by the fixture)
    assert pick(hook("t5"), q, q_pos, k_pos, None, "auto", 0.0) is None


@pytest.mark.parametrize("kind", ["conformer", "transformer"])
@pytest.mark.parametrize("name", ["t5", "shaw", "relative"])
def test_encoder_blocked_equals_reference(name, kind, monkeypatch):
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_ELEMENTS", 1)
    calls = _count_blocked(monkeypatch)
    torch.manual_seed(0)
    enc = build_encoder(kind, PES[name], d_model=D, n_heads=H, n_layers=2, ffn_dim=32, conv_kernel=5, dropout=0.0)
    x, lengths = torch.randn(3, 37, D), torch.tensor([37, 30, 11])
    w = torch.randn(3, 37, D)
    results = []
    for reference in (False, True):
        for m in enc.modules():
            if isinstance(m, MultiHeadAttention):
                m.use_reference = reference
        enc.zero_grad(set_to_none=True)
        out, _ = enc(x, lengths)
        (out * w).sum().backward()
        results.append((out.detach(), {n: p.grad.clone() for n, p in enc.named_parameters() if p.grad is not None}))
    assert len(calls) == 2, "one blocked call per layer"
    (fast, g_fast), (ref, g_ref) = results
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    assert g_fast.keys() == g_ref.keys()
    for n in g_ref:
        torch.testing.assert_close(g_fast[n], g_ref[n], atol=1e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
