"""Shaw et al. 2018: e_ij = q_i·(k_j + a^K_{c(j−i)})/√d, z_i = Σ_j α_ij (v_j + a^V_{c(j−i)}),
c(x) = clip(x, −k, k) + k; the efficient gather equals the per-element formula."""

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import UnknownPEError, build_positional
from asr_pe.models.positional.shaw import ShawPE


def make_pe(k=3, beyond="clip", value_term=False, d_model=16, n_heads=4):
    torch.manual_seed(0)
    return ShawPE(d_model, n_heads, max_distance=k, beyond=beyond, value_term=value_term)


def naive_row(pe, x):
    """The table row for relative distance x = j − i, or None (zero) beyond the window."""
    k = pe.max_distance
    if abs(x) > k and pe.beyond == "zero":
        return None
    return min(max(x, -k), k) + k


@pytest.mark.parametrize("beyond", ["clip", "zero"])
@pytest.mark.parametrize("q_start", [0, 5])
def test_gather_equals_naive_loop(beyond, q_start):
    pe = make_pe(k=3, beyond=beyond)
    B, H, Tq, Tk, d = 2, 4, 6, 13, 4
    q = torch.randn(B, H, Tq, d)
    q_pos, k_pos = torch.arange(q_start, q_start + Tq), torch.arange(Tk)
    bias = pe.logits_bias(q, q_pos, k_pos)
    assert bias.shape == (B, H, Tq, Tk)
    expect = torch.zeros(B, H, Tq, Tk)
    for a, i in enumerate(q_pos.tolist()):
        for j in range(Tk):
            row = naive_row(pe, j - i)
            if row is not None:
                expect[:, :, a, j] = (q[:, :, a] * pe.key_table[row]).sum(-1) / math.sqrt(d)
    torch.testing.assert_close(bias, expect, atol=1e-6, rtol=1e-5)


def test_clip_versus_zero_beyond_the_window():
    k, T = 2, 9
    clip, zero = make_pe(k=k, beyond="clip"), make_pe(k=k, beyond="zero")
    zero.key_table.data.copy_(clip.key_table.data)
    q = torch.randn(1, 4, T, 4)
    pos = torch.arange(T)
    bc, bz = clip.logits_bias(q, pos, pos), zero.logits_bias(q, pos, pos)
    rel = pos[None, :] - pos[:, None]  # j − i
    inside = rel.abs() <= k
    # inside the window both modes are the same table lookup
    torch.testing.assert_close(bc[..., inside], bz[..., inside])
    # beyond it, zero mode contributes nothing ...
    assert (bz[..., ~inside] == 0).all()
    # ... and clip mode repeats the edge rows: column j − i = +5 equals column j − i = +k
    torch.testing.assert_close(bc[..., 0, 5], bc[..., 0, k])
    torch.testing.assert_close(bc[..., 8, 1], bc[..., 8, 8 - k])
    assert (bc[..., ~inside].abs() > 0).any()


def naive_shaw_attention(mha, pe, x, pad):
    """Per-element e_ij, masked softmax and z_i from the paper's equations (float64)."""
    B, T, D = x.shape
    H, d = mha.n_heads, mha.d_head
    W, b = mha.in_proj.weight.double(), mha.in_proj.bias.double()
    xd = x.double()
    q, k, v = (xd @ W[n * D:(n + 1) * D].T + b[n * D:(n + 1) * D] for n in range(3))
    aK = pe.key_table.double()
    aV = pe.value_table.double() if pe.use_value_term else None
    out = torch.zeros(B, T, D, dtype=torch.float64)
    for bi in range(B):
        for h in range(H):
            sl = slice(h * d, (h + 1) * d)
            keys = [j for j in range(T) if not pad[bi, j]]
            for i in range(T):
                e = []
                for j in keys:
                    row = naive_row(pe, j - i)
                    rel_k = aK[row] if row is not None else torch.zeros(d, dtype=torch.float64)
                    e.append((q[bi, i, sl] * (k[bi, j, sl] + rel_k)).sum() / math.sqrt(d))
                alpha = torch.softmax(torch.stack(e), 0)
                z = torch.zeros(d, dtype=torch.float64)
                for n, j in enumerate(keys):
                    row = naive_row(pe, j - i)
                    val = v[bi, j, sl]
                    if aV is not None and row is not None:
                        val = val + aV[row]
                    z = z + alpha[n] * val
                out[bi, i, sl] = z
    return mha.out_proj(out.float())


@pytest.mark.parametrize("value_term", [False, True])
@pytest.mark.parametrize("beyond", ["clip", "zero"])
def test_attention_with_shaw_matches_paper_equations(value_term, beyond):
    pe = make_pe(k=2, beyond=beyond, value_term=value_term)
    assert pe.fused_ok is (not value_term)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 8, 16)
    pad = make_pad_mask(torch.tensor([8, 5]), 8)
    expect = naive_shaw_attention(mha, pe, x, pad)
    for use_reference in (False, True):
        mha.use_reference = use_reference
        out, _ = mha(x, pad, pe=pe)
        torch.testing.assert_close(out[0], expect[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out[1, :5], expect[1, :5], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beyond", ["clip", "zero"])
def test_value_term_per_bucket_sum_equals_naive_formula(beyond):
    pe = make_pe(k=2, beyond=beyond, value_term=True)
    B, H, Tq, Tk = 2, 4, 5, 11
    w = torch.softmax(torch.randn(B, H, Tq, Tk), -1)
    q_pos, k_pos = torch.arange(3, 3 + Tq), torch.arange(Tk)
    got = pe.value_term(w, q_pos, k_pos)
    expect = torch.zeros(B, H, Tq, pe.d_head)
    for a, i in enumerate(q_pos.tolist()):
        for j in range(Tk):
            row = naive_row(pe, j - i)
            if row is not None:
                expect[:, :, a] += w[:, :, a, j, None] * pe.value_table[row]
    torch.testing.assert_close(got, expect, atol=1e-6, rtol=1e-5)
    assert make_pe(value_term=False).value_term(w, q_pos, k_pos) is None


def test_value_term_of_bf16_weights_sums_its_buckets_in_fp32():
    # a clipped bucket collects thousands of weights of ~1/T: summed one by one in bf16 the total
    # stalls at 0.125 for T = 4000 (the bf16 step there outgrows the weight), which is what a
    # CUDA bf16 scatter-add's atomics do (this CPU's kernel accumulates wider, so the
    # accumulation dtype is what is checked here, and the sums against fp64)
    from torch.utils._python_dispatch import TorchDispatchMode

    class ScatterDtypes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.dtypes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "scatter_add" in str(func):
                self.dtypes.append(args[0].dtype)
            return func(*args, **(kwargs or {}))

    pe = make_pe(k=2, beyond="clip", value_term=True)
    with torch.no_grad():
        pe.value_table.zero_()
        pe.value_table[:, 0] = 1.0                      # output column 0 = the sum of every bucket
        pe.value_table[0, 1] = pe.value_table[4, 2] = 1.0  # columns 1, 2 = the two clipped buckets
    Tk = 4000
    w = torch.softmax(torch.zeros(1, 1, 1, Tk), -1).to(torch.bfloat16)
    q_pos, k_pos = torch.tensor([Tk // 2]), torch.arange(Tk)
    with ScatterDtypes() as mode:
        got = pe.value_term(w, q_pos, k_pos)
    assert got.dtype == torch.bfloat16 and mode.dtypes == [torch.float32]
    got = got.float()[0, 0, 0]
    per_bucket = torch.zeros(5, dtype=torch.float64)
    for j in range(Tk):
        per_bucket[naive_row(pe, j - Tk // 2)] += w[0, 0, 0, j].double()
    assert got[0].item() == pytest.approx(per_bucket.sum().item(), rel=0.01)  # ~1
    assert got[1].item() == pytest.approx(per_bucket[0].item(), rel=0.01)
    assert got[2].item() == pytest.approx(per_bucket[4].item(), rel=0.01)


def test_bias_depends_only_on_relative_distance():
    pe = make_pe(k=3)
    q = torch.randn(1, 4, 5, 4)
    base = pe.logits_bias(q, torch.arange(5), torch.arange(9))
    shifted = pe.logits_bias(q, torch.arange(5) + 100, torch.arange(9) + 100)
    torch.testing.assert_close(base, shifted)


def test_tables_per_layer_shared_across_heads_and_yaml_defaults():
    pos = build_positional("shaw", d_model=32, n_heads=4, n_layers=3)
    tables = [pos.layer(i).key_table for i in range(3)]
    assert all(t.shape == (2 * 64 + 1, 8) for t in tables)  # (2k+1, d): one row set for all heads
    assert tables[0] is not tables[1]
    assert pos.layer(0).value_table is None and pos.layer(0).beyond == "clip"


def test_bad_options_raise_clear_errors():
    with pytest.raises(ValueError, match="beyond"):
        build_positional("shaw", d_model=16, n_heads=4, n_layers=1, beyond="wrap")
    with pytest.raises(ValueError, match="max_distance"):
        build_positional("shaw", d_model=16, n_heads=4, n_layers=1, max_distance=0)
    with pytest.raises(UnknownPEError, match="max_len"):
        build_positional("shaw", d_model=16, n_heads=4, n_layers=1, max_len=3)
