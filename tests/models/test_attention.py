"""The shared attention: fused SDPA path == explicit path == a naive per-element loop, with padding."""

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional.base import AttentionPE


def naive_attention(x, kv, mha, key_padding_mask, causal=False, bias=None):
    """Loop over batch, head, query; softmax over the unmasked keys only."""
    B, Tq, D = x.shape
    H, d = mha.n_heads, mha.d_head
    W, b = mha.in_proj.weight, mha.in_proj.bias
    q = x @ W[:D].T + b[:D]
    k = kv @ W[D:2 * D].T + b[D:2 * D]
    v = kv @ W[2 * D:].T + b[2 * D:]
    out = torch.zeros(B, Tq, D, dtype=torch.float64)
    for bi in range(B):
        for h in range(H):
            sl = slice(h * d, (h + 1) * d)
            for i in range(Tq):
                keys = [j for j in range(kv.size(1))
                        if not (key_padding_mask is not None and key_padding_mask[bi, j]) and not (causal and j > i)]
                s = torch.stack([(q[bi, i, sl] * k[bi, j, sl]).sum() / math.sqrt(d)
                                 + (0.0 if bias is None else bias[h, i, j]) for j in keys]).double()
                p = torch.softmax(s, 0)
                out[bi, i, sl] = sum(p[n] * v[bi, j, sl].double() for n, j in enumerate(keys))
    return mha.out_proj(out.float())


class ConstantBias(AttentionPE):
    def __init__(self, bias):
        super().__init__()
        self.bias = bias  # (H, T, T)

    def logits_bias(self, q, q_pos, k_pos):
        return self.bias[:, q_pos][:, :, k_pos]


@pytest.fixture
def setup():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(3, 9, 16)
    lengths = torch.tensor([9, 6, 2])
    return mha, x, make_pad_mask(lengths, 9)


def test_make_pad_mask():
    m = make_pad_mask(torch.tensor([3, 1]), 4)
    assert m.tolist() == [[False, False, False, True], [False, True, True, True]]


@pytest.mark.parametrize("causal", [False, True])
def test_fused_and_explicit_match_naive(setup, causal):
    mha, x, mask = setup
    ref = naive_attention(x, x, mha, mask, causal=causal)
    fused, _ = mha(x, mask, causal=causal)
    explicit, w = mha(x, mask, causal=causal, need_weights=True)
    valid = ~mask
    assert torch.allclose(fused[valid], ref[valid], atol=1e-5)
    assert torch.allclose(explicit[valid], ref[valid], atol=1e-5)
    # padded keys get exactly zero weight; rows sum to one
    assert (w.masked_select(mask[:, None, None, :].expand_as(w)) == 0).all()
    assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-6)


@pytest.mark.parametrize("bias_mode", ["sdpa", "explicit"])
def test_bias_paths_match_naive(setup, bias_mode):
    mha, x, mask = setup
    mha.bias_mode = bias_mode
    bias = torch.randn(4, 9, 9)
    ref = naive_attention(x, x, mha, mask, bias=bias)
    out, _ = mha(x, mask, pe=ConstantBias(bias))
    assert torch.allclose(out[~mask], ref[~mask], atol=1e-5)


@pytest.mark.parametrize("block", [1, 2, 4, 5])
@pytest.mark.parametrize("causal", [False, True])
def test_blocked_equals_unblocked(setup, block, causal):
    mha, x, mask = setup
    bias = torch.randn(4, 9, 9)
    for pe in (None, ConstantBias(bias)):
        full, _ = mha(x, mask, pe=pe, causal=causal)
        mha.block_size = block
        blocked, _ = mha(x, mask, pe=pe, causal=causal)
        mha.block_size = None
        assert torch.allclose(full, blocked, atol=1e-6)


def test_cross_attention_matches_naive(setup):
    mha, x, _ = setup
    mem = torch.randn(3, 5, 16)
    mem_mask = make_pad_mask(torch.tensor([5, 3, 1]), 5)
    ref = naive_attention(x, mem, mha, mem_mask)
    out, _ = mha(x, mem_mask, kv=mem)
    assert torch.allclose(out, ref, atol=1e-5)
