"""The speed paths (asr_pe/models/attention_fast_paths.py) compute the same function as the readable ones:

* a learned bias through the blocked path (``SDPAWithBlockBias``; its own tests:
  tests/models/test_block_bias.py) or, with that switched off, through the fused kernel with a
  written-out backward (``SDPAWithBiasGrad``)
  and Transformer-XL as widened q/k (``RelativePE.fused_qk``) give the reference path's
  outputs *and gradients*; both switch on above ``FUSED_GRAD_MIN_KEYS`` keys, lowered here so
  that small inputs exercise them;
* the FFT grouped convolution of the conv PE equals ``F.conv1d``;
* offset-only biases laid out by ``toeplitz``, Shaw's row layout and the strided-view
  ``rel_shift`` equal entry-by-entry definitions.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from asr_pe.models import attention_fast_paths as fast_paths, build_encoder
from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.base import descending_offsets, toeplitz
from asr_pe.models.positional.conv import _fast_len, grouped_conv1d_fft
from asr_pe.models.positional.relative import RelativePE, rel_shift, rel_shift_naive
from asr_pe.models.positional.shaw import ShawPE

D, H = 16, 4
LEARNED = ["t5", "shaw", "relative", {"attention": {"name": "alibi", "learned_scale": True}}]


def run(enc, x, lengths, proj, reference):
    for m in enc.modules():
        if isinstance(m, MultiHeadAttention):
            m.use_reference = reference
    enc.zero_grad(set_to_none=True)
    out, _ = enc(x, lengths)
    (out * proj).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in enc.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("blocked", [True, False], ids=["block_bias", "bias_grad_or_widened"])
@pytest.mark.parametrize("kind", ["transformer", "conformer"])
@pytest.mark.parametrize("pe", LEARNED + ["rem", "none", "rope"], ids=str)
def test_fused_training_paths_equal_reference_with_gradients(pe, kind, blocked, monkeypatch):
    """Both generations of the learned-bias fast path: ``SDPAWithBlockBias`` (the default; small
    blocks here, so an utterance spans several) and, with it switched off, ``SDPAWithBiasGrad`` /
    the widened q/k (still taken where no ``BlockBias`` is offered)."""
    monkeypatch.setattr(fast_paths, "FUSED_GRAD_MIN_KEYS", 0)
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_MIN_KEYS", 0 if blocked else 10 ** 9)
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_ELEMENTS", 1)  # 16-row blocks: 19 = 16 + 3
    torch.manual_seed(0)
    enc = build_encoder(kind, pe, d_model=D, n_heads=H, n_layers=2, ffn_dim=32, conv_kernel=5, dropout=0.0).eval()
    g = torch.Generator().manual_seed(1)
    x, lengths = torch.randn(3, 19, D, generator=g), torch.tensor([19, 13, 5])
    proj = torch.randn(3, 19, D, generator=g)
    fast, fast_grads = run(enc, x, lengths, proj, reference=False)
    ref, ref_grads = run(enc, x, lengths, proj, reference=True)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    assert fast_grads.keys() == ref_grads.keys()
    for n in ref_grads:
        torch.testing.assert_close(fast_grads[n], ref_grads[n], atol=1e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


def test_the_paths_are_actually_taken(monkeypatch):
    """Guard against the tests above passing because everything fell back to the reference."""
    monkeypatch.setattr(fast_paths, "FUSED_GRAD_MIN_KEYS", 0)
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_MIN_KEYS", 10 ** 9)  # the blocked path: test_block_bias.py
    calls = {"bias_grad": 0, "widened": 0, "key_lengths": None}
    orig_apply = fast_paths.SDPAWithBiasGrad.apply
    orig_widened = fast_paths.attend_widened

    def counting_apply(*a):
        calls["bias_grad"] += 1
        calls["key_lengths"] = a[7] if len(a) > 7 else None
        return orig_apply(*a)

    def counting_widened(*a):
        calls["widened"] += 1
        return orig_widened(*a)

    monkeypatch.setattr(fast_paths.SDPAWithBiasGrad, "apply", counting_apply)
    monkeypatch.setattr(fast_paths, "attend_widened", counting_widened)
    x, lengths = torch.randn(2, 9, D), torch.tensor([9, 6])
    for pe in ("t5", "relative"):
        enc = build_encoder("transformer", pe, d_model=D, n_heads=H, n_layers=1, dropout=0.0)
        enc(x, lengths)[0].sum().backward()
    # T5's shared bias: one call, each utterance over its own keys (padding not folded in)
    assert calls == {"bias_grad": 1, "widened": 1, "key_lengths": [9, 6]}
    with torch.no_grad():  # inference: neither (no gradient needed: the bias goes to SDPA)
        enc(x, lengths)
    assert calls == {"bias_grad": 1, "widened": 1, "key_lengths": [9, 6]}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pe_name", ["alibi", "t5", "shaw"])
def test_bias_with_padding_is_attended_per_utterance(pe_name, causal, grad, monkeypatch):
    """A bias and a padding mask on CPU: one SDPA call per utterance over its own keys, the
    padding never folded into the bias (shared: ALiBi, T5; per utterance: Shaw), with the
    outputs (every row, padded ones too) and gradients of the batched call with the padding
    folded in (``bias_mode="sdpa"``). (A learned bias takes the blocked path by default, tested
    in tests/models/test_block_bias.py; switched off here to test this one.)"""
    monkeypatch.setattr(fast_paths, "FUSED_GRAD_MIN_KEYS", 0)
    monkeypatch.setattr(fast_paths, "BLOCK_BIAS_MIN_KEYS", 10 ** 9)
    torch.manual_seed(0)
    pe = build_positional(pe_name, d_model=D, n_heads=H, n_layers=1, causal=causal).layer(0)
    mha = MultiHeadAttention(D, H)
    x, pad = torch.randn(3, 11, D, requires_grad=True), make_pad_mask(torch.tensor([11, 8, 3]), 11)
    masks = []
    orig = fast_paths.combine_mask
    monkeypatch.setattr(fast_paths, "combine_mask", lambda *a: masks.append(orig(*a)) or masks[-1])
    with torch.set_grad_enabled(grad):
        fast, _ = mha(x, pad, pe=pe, causal=causal)
        assert all(m is None or m.size(0) == 1 for m in masks), [m.shape for m in masks]
        mha.bias_mode = "sdpa"  # the batched call: padding folded into the bias
        ref, _ = mha(x, pad, pe=pe, causal=causal)
    assert any(m is not None and m.size(0) == 3 for m in masks), "the reference did not fold the padding"
    masks.clear()
    mha.bias_mode = "auto"
    with torch.no_grad():  # a padding mask that hides nothing: one batched call, no mask folded in
        full, _ = mha(x, torch.zeros_like(pad), pe=pe, causal=causal)
        unmasked, _ = mha(x, None, pe=pe, causal=causal)
    assert len(masks) == 2, "not one batched call per forward"
    torch.testing.assert_close(full, unmasked)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    if grad:
        g_fast = torch.autograd.grad(fast.square().sum(), [x] + list(pe.parameters()))
        g_ref = torch.autograd.grad(ref.square().sum(), [x] + list(pe.parameters()))
        for a, b in zip(g_fast, g_ref):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_widened_relative_scores_equal_bias_form(causal):
    """(q+u)·k + (q+v)·p_{i−j} as one dot product of width d + D, for a block inside the keys."""
    torch.manual_seed(0)
    pe = RelativePE(D, H)
    q, k = torch.randn(2, H, 7, D // H), torch.randn(2, H, 12, D // H)
    q_pos, k_pos = torch.arange(3, 10), torch.arange(12)
    qa, ka = pe.fused_qk(q, k, q_pos, k_pos)
    assert qa.shape == (2, H, 7, D // H + D) and ka.shape == (2, H, 12, D // H + D)
    qu, _ = pe.transform_qk(q, k, q_pos, k_pos)
    expected = qu @ k.transpose(-1, -2) / math.sqrt(D // H) + pe.logits_bias(q, q_pos, k_pos)
    torch.testing.assert_close(qa @ ka.transpose(-1, -2) / math.sqrt(D // H), expected, atol=1e-5, rtol=1e-5)
    mha = MultiHeadAttention(D, H)
    x, pad = torch.randn(2, 11, D), make_pad_mask(torch.tensor([11, 8]), 11)
    with torch.no_grad():
        mha.use_reference = True
        ref, _ = mha(x, pad, pe=pe, causal=causal)
    mha.use_reference = False
    orig = fast_paths.FUSED_GRAD_MIN_KEYS, fast_paths.BLOCK_BIAS_MIN_KEYS
    fast_paths.FUSED_GRAD_MIN_KEYS, fast_paths.BLOCK_BIAS_MIN_KEYS = 0, 10 ** 9
    try:
        out, _ = mha(x, pad, pe=pe, causal=causal)  # grad enabled: the widened path
    finally:
        fast_paths.FUSED_GRAD_MIN_KEYS, fast_paths.BLOCK_BIAS_MIN_KEYS = orig
    torch.testing.assert_close(out[0], ref[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1, :8], ref[1, :8], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(2, 32, 25, 4, 16), (3, 144, 250, 16, 64), (2, 16, 7, 16, 65), (1, 8, 40, 2, 17)])
def test_fft_grouped_conv_equals_conv1d(shape):
    B, C, T, groups, k = shape
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(B, C, T, generator=g), torch.randn(C, C // groups, k, generator=g) * 0.1, torch.randn(C, generator=g)
    ref = F.conv1d(x, w, b, padding=k // 2, groups=groups)
    out = grouped_conv1d_fft(x, w, b, k // 2, groups)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-5)


def test_fast_fft_lengths():
    assert [_fast_len(n) for n in (1, 7, 11, 97, 1000, 90_063)] == [1, 8, 12, 100, 1000, 91_125]  # 91 125 = 3⁶·5³
    for n in (7, 97, 90_063):
        m = _fast_len(n)
        while m % 2 == 0:
            m //= 2
        while m % 3 == 0:
            m //= 3
        while m % 5 == 0:
            m //= 5
        assert m == 1


def test_conv_pe_long_kernel_uses_fft_and_matches_conv1d():
    torch.manual_seed(0)
    pe = build_positional("conv", d_model=D, n_heads=H, n_layers=1, frame_shift_s=0.04).input  # 64 taps
    x, lengths = torch.randn(2, 90, D), torch.tensor([90, 50])
    out = pe(x, lengths)
    xz = x.masked_fill(make_pad_mask(lengths, 90)[..., None], 0.0).transpose(1, 2)
    y = F.conv1d(xz, pe.conv.weight, pe.conv.bias, padding=32, groups=pe.groups)[..., :-1]  # SamePad
    torch.testing.assert_close(out, x + F.gelu(y).transpose(1, 2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("q_range,k_range", [((0, 7), (0, 7)), ((3, 10), (0, 12)), ((100, 104), (0, 5)), ((0, 3), (50, 61))])
def test_toeplitz_layout(q_range, k_range):
    q_pos, k_pos = torch.arange(*q_range), torch.arange(*k_range)
    offsets = descending_offsets(q_pos, k_pos)
    table = torch.randn(3, offsets.numel())
    lookup = {int(o): i for i, o in enumerate(offsets)}
    expected = torch.stack([torch.stack([table[:, lookup[int(i - j)]] for j in k_pos], -1) for i in q_pos], -2)
    # row-major whatever the shape, also from a transposed table such as T5's (H, W) = (W, H).t()
    # (a bias in another layout makes SDPA copy it or read it strided: slow)
    for given in (table, table.t().contiguous().t()):
        laid_out = toeplitz(given, q_pos.numel(), k_pos.numel())
        assert torch.equal(laid_out, expected)
        assert laid_out.is_contiguous(), laid_out.stride()
    assert descending_offsets(torch.tensor([0, 2]), k_pos) is None  # not a range


def test_toeplitz_of_a_wide_block_is_row_major_and_its_gradient_sums_per_offset():
    table = torch.randn(2, 4 + 300 - 1, requires_grad=True)  # a long-form query block: Tq << Tk
    laid_out = toeplitz(table, 4, 300)
    assert laid_out.is_contiguous(), laid_out.stride()
    laid_out.sum().backward()
    # offset column c occurs once per row whose window covers it: min(c + 1, Tq, W - c) times
    W = table.size(-1)
    counts = torch.tensor([min(c + 1, 4, W - c) for c in range(W)], dtype=torch.float32)
    assert torch.equal(table.grad, counts.expand(2, W))


@pytest.mark.parametrize("beyond", ["clip", "zero"])
@pytest.mark.parametrize("k", [1, 3, 64])
def test_shaw_row_layout_equals_gather(beyond, k):
    torch.manual_seed(0)
    pe = ShawPE(D, H, max_distance=k, beyond=beyond)
    q = torch.randn(2, H, 7, D // H)
    for q_pos, k_pos in [(torch.arange(7), torch.arange(7)), (torch.arange(3, 10), torch.arange(12)),
                         (torch.arange(100, 107), torch.arange(5)), (torch.arange(7), torch.arange(50, 60))]:
        fast = pe.logits_bias(q, q_pos, k_pos)
        idx = pe._buckets(q_pos, k_pos)  # (Tq, Tk) table rows, 2k + 1 = the zero row
        table = torch.cat([pe.key_table, torch.zeros(1, D // H)]) if beyond == "zero" else pe.key_table
        expected = torch.einsum("bhqd,qkd->bhqk", q, table[idx]) / math.sqrt(D // H)
        torch.testing.assert_close(fast, expected, atol=1e-6, rtol=1e-5)


def test_rel_shift_view_of_non_contiguous_input():
    x = torch.randn(2, 3, 9, 5).transpose(-1, -2)  # (2, 3, 5, 9): Tq = 5, Tk = 5, non-contiguous
    torch.testing.assert_close(rel_shift(x), rel_shift_naive(x), rtol=0, atol=0)


# ---- head padding for the GPU's fused kernels (fast_paths.sdpa) ----

@pytest.mark.parametrize("case", ["bool_mask", "float_mask", "causal", "scale_and_wider_qk"])
def test_padded_head_sdpa_equals_sdpa_values_and_gradients(case):
    # zero columns add nothing to q·k and give zero output columns: the padded call (what a GPU
    # in bf16 runs for d = 36) is the same function, forward and backward
    g = torch.Generator().manual_seed(0)
    B, H, Tq, Tk, d, dv = 2, 3, 5, 7, 36, 36
    if case == "scale_and_wider_qk":
        d = 44  # Transformer-XL's widened q/k beside d_v = 36
    q, k = torch.randn(B, H, Tq, d, generator=g), torch.randn(B, H, Tk, d, generator=g)
    v = torch.randn(B, H, Tk, dv, generator=g)
    kwargs = {}
    if case == "bool_mask":
        kwargs["attn_mask"] = ~make_pad_mask(torch.tensor([7, 4]), Tk)[:, None, None, :]
    elif case == "float_mask":
        kwargs["attn_mask"] = torch.randn(1, H, Tq, Tk, generator=g)
    elif case == "causal":
        q = torch.randn(B, H, Tk, d, generator=g)
        kwargs["is_causal"] = True
    else:
        kwargs["scale"] = 0.3
    outs, grads = [], []
    for pad in (False, True):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = fast_paths.sdpa(*leaves, pad_heads=pad, **kwargs)
        out.mul(torch.arange(out.numel()).reshape(out.shape).sin()).sum().backward()
        outs.append(out)
        grads.append([t.grad for t in leaves])
    assert outs[1].shape == outs[0].shape == (B, H, q.size(2), dv)
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(grads[1], grads[0]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_heads_are_padded_only_on_cuda_in_half_precision():
    q = torch.randn(1, 2, 3, 36)
    assert not fast_paths.head_padding_needed(q, q)  # CPU: never
    assert not fast_paths.head_padding_needed(q.bfloat16(), q.bfloat16())
    if torch.cuda.is_available():  # (the GPU machine: measured in docs/benchmarks.md)
        qc = q.cuda()
        assert not fast_paths.head_padding_needed(qc, qc)  # fp32: the fused kernel takes d = 36
        assert fast_paths.head_padding_needed(qc.bfloat16(), qc.bfloat16())
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert fast_paths.head_padding_needed(qc, qc)
        assert not fast_paths.head_padding_needed(qc[..., :32].half(), qc[..., :32].half())
