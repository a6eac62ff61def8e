"""Transformer-XL relative PE: scores_ij = [(q_i+u)·k_j + (q_i+v)·p_{i−j}]/√d with
p_r = R(r)·W_pos; rel_shift is a gather of offset i − j; no length cap; blocks equal the whole."""

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.relative import RelativePE, rel_shift, rel_shift_naive
from asr_pe.models.positional.sinusoidal import sinusoid


def make_pe(d_model=16, n_heads=4):
    torch.manual_seed(0)
    return RelativePE(d_model, n_heads)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_rel_shift_equals_naive_gather(T):
    x = torch.randn(2, 3, T, 2 * T - 1)
    torch.testing.assert_close(rel_shift(x), rel_shift_naive(x), rtol=0, atol=0)


@pytest.mark.parametrize("Tq,Tk", [(1, 5), (3, 8), (6, 2), (4, 4)])
def test_rel_shift_rectangular_blocks_equal_naive_gather(Tq, Tk):
    x = torch.randn(2, Tq, Tq + Tk - 1)
    torch.testing.assert_close(rel_shift(x, Tk), rel_shift_naive(x, Tk), rtol=0, atol=0)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_rel_shift_picks_offset_i_minus_j(T):
    # column c of the table holds offset T − 1 − c (T−1 … −(T−1)); write the offset itself
    table = (T - 1 - torch.arange(2 * T - 1)).float().expand(T, 2 * T - 1)
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    assert torch.equal(rel_shift(table), (i - j).float())


def test_plus_and_minus_offsets_have_different_embeddings():
    pe = make_pe()
    r = torch.arange(1, 6)
    emb_pos, emb_neg = sinusoid(r, 16), sinusoid(-r, 16)
    # signed sines: R(−r) = [−sin(rω), cos(rω)] interleaved
    torch.testing.assert_close(emb_neg[:, 0::2], -emb_pos[:, 0::2])
    torch.testing.assert_close(emb_neg[:, 1::2], emb_pos[:, 1::2])
    p_pos, p_neg = pe.position_table(r), pe.position_table(-r)  # (H, 5, d)
    assert ((p_pos - p_neg).flatten(0, -2).abs().amax(-1) > 1e-4).all()
    # and the offset-0 row equals R(0) W_pos = [0, 1, 0, 1, …] W_pos
    p0 = pe.position_table(torch.zeros(1, dtype=torch.long)).transpose(0, 1).reshape(1, 16)
    torch.testing.assert_close(p0, sinusoid(torch.zeros(1), 16) @ pe.linear_pos.weight.T)


def naive_scores(pe, q, k, q_pos, k_pos):
    """[(q_i + u)·k_j + (q_i + v)·p_{i−j}]/√d entry by entry, p_r = R(r)·W_pos per head."""
    B, H, Tq, d = q.shape
    out = torch.zeros(B, H, Tq, k.size(2))
    W = pe.linear_pos.weight
    for a, i in enumerate(q_pos.tolist()):
        for b, j in enumerate(k_pos.tolist()):
            p = (sinusoid(torch.tensor([float(i - j)]), H * d) @ W.T).view(H, d)  # (H, d)
            content = ((q[:, :, a] + pe.pos_bias_u) * k[:, :, b]).sum(-1)
            position = ((q[:, :, a] + pe.pos_bias_v) * p).sum(-1)
            out[:, :, a, b] = (content + position) / math.sqrt(d)
    return out


def hook_scores(pe, q, k, q_pos, k_pos):
    q2, k2 = pe.transform_qk(q, k, q_pos, k_pos)
    return q2 @ k2.transpose(-2, -1) / math.sqrt(q.size(-1)) + pe.logits_bias(q, q_pos, k_pos)


@pytest.mark.parametrize("q_pos", [torch.arange(6), torch.arange(2, 5), torch.tensor([0, 3, 5])])
def test_hooks_give_transformer_xl_scores(q_pos):
    pe = make_pe()
    T = 6
    q, k = torch.randn(2, 4, len(q_pos), 4), torch.randn(2, 4, T, 4)
    torch.testing.assert_close(
        hook_scores(pe, q, k, q_pos, torch.arange(T)), naive_scores(pe, q, k, q_pos, torch.arange(T)),
        atol=1e-5, rtol=1e-5,
    )


@pytest.mark.parametrize("T", [1, 2, 7, 23])
def test_blocked_bias_equals_full(T):
    pe = make_pe()
    q = torch.randn(2, 4, T, 4)
    pos = torch.arange(T)
    full = pe.logits_bias(q, pos, pos)
    assert full.shape == (2, 4, T, T)
    for block in (1, 3, 5):
        for s in range(0, T, block):
            e = min(T, s + block)
            block_bias = pe.logits_bias(q[:, :, s:e], pos[s:e], pos)  # (B, H, e − s, T)
            torch.testing.assert_close(block_bias, full[:, :, s:e], atol=1e-6, rtol=1e-5)
    # non-contiguous rows take the gather fallback and still agree
    rows = torch.tensor(sorted({0, T // 2, T - 1}))
    torch.testing.assert_close(pe.logits_bias(q[:, :, rows], rows, pos), full[:, :, rows], atol=1e-6, rtol=1e-5)


def test_logits_depend_only_on_offset():
    pe = make_pe()
    q, k = torch.randn(1, 4, 5, 4), torch.randn(1, 4, 9, 4)
    base = hook_scores(pe, q, k, torch.arange(5), torch.arange(9))
    torch.testing.assert_close(hook_scores(pe, q, k, torch.arange(5) + 37, torch.arange(9) + 37), base,
                               atol=1e-5, rtol=1e-5)


def test_content_at_an_offset_inside_a_longer_masked_input_gets_the_same_scores():
    torch.manual_seed(1)
    pe, mha = make_pe(), MultiHeadAttention(16, 4).eval()
    T, s, T_long = 7, 11, 25
    x = torch.randn(1, T, 16)
    x_long = torch.randn(1, T_long, 16)
    x_long[:, s:s + T] = x
    pad_long = torch.ones(1, T_long, dtype=torch.bool)
    pad_long[:, s:s + T] = False  # prefix and suffix are hidden keys
    out, w = mha(x, None, pe=pe, need_weights=True)
    out_long, w_long = mha(x_long, pad_long, pe=pe, need_weights=True)
    torch.testing.assert_close(w_long[:, :, s:s + T, s:s + T], w, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out_long[:, s:s + T], out, atol=1e-5, rtol=1e-5)
    # sanity: without u, v and W_pos the scores would not see the order — they must here
    assert not torch.allclose(w[0, :, 1, 0], w[0, :, 1, 2])


def test_no_length_cap_and_padding():
    pe = build_positional("relative", d_model=16, n_heads=2, n_layers=1).layer(0)
    mha = MultiHeadAttention(16, 2, block_size=256).eval()
    x = torch.randn(2, 1500, 16)
    pad = make_pad_mask(torch.tensor([1500, 700]), 1500)
    with torch.no_grad():
        out, _ = mha(x, pad, pe=pe)
        out1, _ = mha(x[1:, :700], None, pe=pe)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1, :700], out1[0], atol=1e-5, rtol=1e-5)


def test_parameters_per_layer_and_all_receive_gradients():
    pos = build_positional("relative", d_model=16, n_heads=4, n_layers=2)
    assert pos.layer(0).pos_bias_u is not pos.layer(1).pos_bias_u
    pe = pos.layer(0)
    mha = MultiHeadAttention(16, 4)
    out, _ = mha(torch.randn(2, 6, 16), make_pad_mask(torch.tensor([6, 4]), 6), pe=pe)
    (out * torch.randn_like(out)).sum().backward()
    for name, p in pe.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
