"""REM / RSA (Huang et al. 2023): O_h = [(1 − σ(μ))·softmax(S_h) + σ(μ)·P_h]·V_h with
P regular λ^n, cyclic γ^n·cos(nθ) / γ^n·sin(nθ), dilated (n/dil on the grid), n = |i − j|."""

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.rem import REMPE, allocate_heads

HEADS = ["regular", "cyclic_cos", "cyclic_sin", "regular:2", "cyclic_cos:3", "cyclic_sin:2"]


def make_pe(heads=HEADS, causal=False, **kw):
    torch.manual_seed(0)
    pe = REMPE(d_model=4 * len(heads), n_heads=len(heads), causal=causal, heads=heads, **kw)
    with torch.no_grad():  # one negative λ, so the alternating sign is exercised
        pe.eta[0] = -abs(float(pe.eta[0]))
    return pe


def naive_entry(pe, h, i, j):
    """P_h[i, j] from the paper's definitions."""
    kind, dil = pe.allocation[h]
    if pe.causal and j >= i:
        return 0.0
    n = abs(i - j)
    if n == 0 or kind == "plain" or n % dil:
        return 0.0
    n //= dil
    if kind == "regular":
        lam = math.tanh(pe.eta.detach()[pe.reg_heads.tolist().index(h)].item())
        return lam ** n
    c = pe.cyc_heads.tolist().index(h)
    gamma = 1 / (1 + math.exp(-pe.nu.detach()[c].item()))
    theta = pe.theta.detach()[c].item()
    return gamma ** n * (math.cos(n * theta) if kind == "cyclic_cos" else math.sin(n * theta))


@pytest.mark.parametrize("causal", [False, True])
def test_rem_matches_formula_entry_by_entry(causal):
    pe = make_pe(causal=causal)
    T = 9
    pos = torch.arange(T)
    P = pe.rem_matrix(pos, pos)
    assert P.shape == (len(HEADS), T, T)
    expect = torch.tensor(
        [[[naive_entry(pe, h, i, j) for j in range(T)] for i in range(T)] for h in range(len(HEADS))]
    )
    torch.testing.assert_close(P, expect, atol=1e-6, rtol=1e-5)
    assert (P[0, 2, 1] < 0) and (P[0, 2, 0] > 0)  # λ < 0: sign alternates with the lag


def test_structure_zero_diagonal_symmetric_and_causal_lower_triangular():
    T = 11
    pos = torch.arange(T)
    bi = make_pe().rem_matrix(pos, pos)
    ca = make_pe(causal=True).rem_matrix(pos, pos)
    assert (torch.diagonal(bi, dim1=-2, dim2=-1) == 0).all()
    torch.testing.assert_close(bi, bi.transpose(-2, -1))
    assert torch.equal(ca, torch.tril(ca, diagonal=-1))
    torch.testing.assert_close(ca, torch.tril(bi, diagonal=-1))  # the same lags below the diagonal
    # dilated heads are zero off their grid: head 3 is regular:2, head 4 cyclic_cos:3
    i, j = torch.meshgrid(pos, pos, indexing="ij")
    assert (bi[3][(i - j) % 2 == 1] == 0).all() and (bi[4][(i - j) % 3 != 0] == 0).all()


def test_blocks_are_rows_of_the_full_matrix_and_depend_on_lag_only():
    pe = make_pe()
    full = pe.rem_matrix(torch.arange(12), torch.arange(12))
    torch.testing.assert_close(pe.rem_matrix(torch.arange(4, 9), torch.arange(12)), full[:, 4:9])
    torch.testing.assert_close(pe.rem_matrix(torch.arange(5) + 500, torch.arange(12) + 500), full[:, :5])
    rows, cols = torch.tensor([0, 3, 4, 10]), torch.tensor([1, 2, 7, 11, 5])  # not ranges: direct path
    torch.testing.assert_close(pe.rem_matrix(rows, cols), full[:, rows][:, :, cols])


def test_padded_keys_get_zero_weight_in_the_mixed_weights():
    pe = make_pe(heads=["regular", "cyclic_cos", "cyclic_sin", "regular:2"])
    mha = MultiHeadAttention(16, 4).eval()
    pad = make_pad_mask(torch.tensor([10, 6]), 10)
    _, w = mha(torch.randn(2, 10, 16), pad, pe=pe, need_weights=True)
    assert (w[1, :, :, 6:] == 0).all()
    assert (w[1, :, :6, :6] != 0).any()
    P = pe.rem_matrix(torch.arange(10), torch.arange(10), pad)  # (B, H, T, T)
    assert P.shape == (2, 4, 10, 10) and (P[1, ..., 6:] == 0).all()


@pytest.mark.parametrize("normalize", ["none", "row"])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_mix_equals_explicit_mixed_weights(normalize, causal):
    pe = make_pe(heads=["regular", "cyclic_sin", "regular:2", "plain"], normalize=normalize, causal=causal)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(3, 10, 16)
    pad = make_pad_mask(torch.tensor([10, 7, 3]), 10)
    out, _ = mha(x, pad, pe=pe, causal=causal)  # fused: (1 − σ)·SDPA + σ·P@V
    ref, w = mha(x, pad, pe=pe, causal=causal, need_weights=True)  # explicit, mixed weights
    # the mixed weights reproduce the output: out = out_proj(W_mixed @ V)
    D = 16
    v = (x @ mha.in_proj.weight[2 * D:].T + mha.in_proj.bias[2 * D:]).view(3, 10, 4, 4).transpose(1, 2)
    manual = mha.out_proj((w @ v).transpose(1, 2).reshape(3, 10, D))
    for b, L in enumerate([10, 7, 3]):
        torch.testing.assert_close(out[b, :L], ref[b, :L], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(manual[b, :L], out[b, :L], atol=1e-5, rtol=1e-5)
    # the mix, checked by hand: (1 − σ)·softmax + σ·P with P masked (and normalised)
    g = torch.sigmoid(pe.mu) * pe.is_rem
    P = pe.rem_matrix(torch.arange(10), torch.arange(10), pad)
    mha.use_reference = True
    _, soft = MultiHeadAttention.forward(mha, x, pad, pe=None, causal=causal, need_weights=True)
    g = g[None, :, None, None]  # (1, H, 1, 1)
    torch.testing.assert_close(w, (1 - g) * soft + g * P, atol=1e-6, rtol=1e-5)
    assert torch.equal(w[:, 3], soft[:, 3])  # the plain head is ordinary attention


def test_row_normalisation_sums_abs_to_one_over_valid_keys():
    pe = make_pe(heads=["regular", "cyclic_cos"], normalize="row")
    pad = make_pad_mask(torch.tensor([8, 5]), 8)
    P = pe.rem_matrix(torch.arange(8), torch.arange(8), pad)
    torch.testing.assert_close(P[0].abs().sum(-1), torch.ones(2, 8))
    torch.testing.assert_close(P[1].abs().sum(-1), torch.ones(2, 8))
    assert (P[1, ..., 5:] == 0).all()
    # causal: the first row has no earlier key and stays zero rather than dividing by 0
    Pc = make_pe(heads=["regular"], normalize="row", causal=True).rem_matrix(torch.arange(4), torch.arange(4))
    assert torch.equal(Pc[0, 0], torch.zeros(4)) and torch.isclose(Pc[0, 1:].abs().sum(-1), torch.ones(3)).all()


def test_output_depends_only_on_relative_positions():
    """Same content at offset s of a longer input, prefix/suffix hidden as padded keys."""
    torch.manual_seed(3)
    pe = make_pe(heads=["regular", "cyclic_cos", "cyclic_sin", "regular:2"], normalize="none")
    mha = MultiHeadAttention(16, 4).eval()
    T, s, T_long = 8, 13, 30
    x = torch.randn(1, T, 16)
    x_long = torch.randn(1, T_long, 16)
    x_long[:, s:s + T] = x
    pad_long = torch.ones(1, T_long, dtype=torch.bool)
    pad_long[:, s:s + T] = False
    for need_weights in (False, True):
        out, _ = mha(x, None, pe=pe, need_weights=need_weights)
        out_long, _ = mha(x_long, pad_long, pe=pe, need_weights=need_weights)
        torch.testing.assert_close(out_long[:, s:s + T], out, atol=1e-5, rtol=1e-5)
    # with q = k = 0 the softmax is uniform over the valid keys, so every difference between
    # output rows comes from the REM term alone: it must be shift-invariant by itself
    with torch.no_grad():
        mha.in_proj.weight[:32].zero_()
        mha.in_proj.bias[:32].zero_()
    out, _ = mha(x, None, pe=pe)
    out_long, _ = mha(x_long, pad_long, pe=pe)
    torch.testing.assert_close(out_long[:, s:s + T], out, atol=1e-5, rtol=1e-5)


def test_head_allocation_forms():
    assert [t for t, _ in allocate_heads("auto", 4)] == ["regular", "regular", "cyclic_cos", "cyclic_sin"]
    assert [t for t, _ in allocate_heads("auto", 2)] == ["regular", "cyclic_cos"]
    assert allocate_heads({"regular": 1, "cyclic_sin:3": 2}, 4) == [
        ("regular", 1), ("cyclic_sin", 3), ("cyclic_sin", 3), ("plain", 1)]
    assert allocate_heads(["cyclic_cos"], 3) == [("cyclic_cos", 1), ("plain", 1), ("plain", 1)]
    with pytest.raises(ValueError, match="3 head types"):
        allocate_heads(["regular"] * 3, 2)
    with pytest.raises(ValueError, match="unknown head type"):
        allocate_heads(["spiral"], 2)
    with pytest.raises(ValueError, match="no REM head"):
        allocate_heads(["plain"], 2)
    with pytest.raises(ValueError, match="dilation"):
        allocate_heads(["regular:0"], 2)


def test_plain_heads_have_gate_zero_and_per_head_gates():
    pe = make_pe(heads=["regular", "plain"], gate="head")
    assert pe.mu.shape == (2,)
    g = pe.gate_value()
    assert g[1] == 0 and 0 < g[0] < 1
    assert (pe.rem_matrix(torch.arange(5), torch.arange(5))[1] == 0).all()
    assert make_pe(heads=["regular", "plain"]).mu.shape == (1,)


def test_init_ranges_and_seeded():
    torch.manual_seed(7)
    a = REMPE(32, 8)
    torch.manual_seed(7)
    b = REMPE(32, 8)
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(pa, pb), n
    big = [REMPE(32, 8) for _ in range(20)]
    eta = torch.cat([m.eta for m in big]).detach()
    assert ((eta.abs() >= 1) & (eta.abs() <= 2)).all() and (eta < 0).any() and (eta > 0).any()
    nu = torch.cat([m.nu for m in big]).detach()
    assert ((nu >= 1) & (nu <= 2)).all()
    assert torch.allclose(torch.cat([m.theta for m in big]), torch.tensor(math.pi / 4))
    mu = torch.cat([m.mu for m in big]).detach()
    assert ((mu >= -3) & (mu <= 3)).all()


def test_gradients_reach_every_rem_parameter_and_long_inputs_run():
    pe = build_positional("rem", d_model=16, n_heads=4, n_layers=1).layer(0)
    mha = MultiHeadAttention(16, 4)
    out, _ = mha(torch.randn(2, 9, 16), make_pad_mask(torch.tensor([9, 5]), 9), pe=pe)
    (out * torch.randn_like(out)).sum().backward()
    for name, p in pe.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    mha.eval().block_size = 300
    with torch.no_grad():
        long, _ = mha(torch.randn(1, 2000, 16), None, pe=pe)
    assert torch.isfinite(long).all()


def test_bad_options():
    with pytest.raises(ValueError, match="normalize"):
        build_positional("rem", d_model=16, n_heads=4, n_layers=1, normalize="softmax")
    with pytest.raises(ValueError, match="gate"):
        build_positional("rem", d_model=16, n_heads=4, n_layers=1, gate="global")
