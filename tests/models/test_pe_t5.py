"""T5 relative bias: buckets equal the reference values and an independent scalar
re-implementation of the formula, the table is one parameter shared by every layer, the
bias depends only on j − i, and every attention path gives the same output."""

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention
from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.t5 import T5RelativeBias, t5_bucket

D, H = 32, 4

# Reference values (HF T5 relative buckets): r = j − i -> bucket (num_buckets=32, max_distance=128, bidirectional)
REFERENCE = {0: 0, -7: 7, -8: 8, -64: 14, 1: 17, 8: 24, 64: 30}
REFERENCE.update({r: 15 for r in (-100, -127, -128, -129, -200, -10_000)})
REFERENCE.update({r: 31 for r in (100, 127, 128, 200, 10_000)})


def bucket_scalar(r: int, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128) -> int:
    """Straight transcription of T5's _relative_position_bucket for one offset r = j − i."""
    ret = 0
    if bidirectional:
        num_buckets //= 2
        if r > 0:
            ret += num_buckets
        n = abs(r)
    else:
        n = max(-r, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    v = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(v, num_buckets - 1)


def test_reference_values():
    rel = torch.tensor(sorted(REFERENCE))
    got = t5_bucket(rel)
    assert got.tolist() == [REFERENCE[r] for r in sorted(REFERENCE)]


def test_full_range_matches_scalar_formula_and_is_monotone():
    rel = torch.arange(-200, 201)
    got = t5_bucket(rel).tolist()
    assert got == [bucket_scalar(r) for r in range(-200, 201)]
    # exact for small offsets, then non-decreasing in |r| within each sign, all 32 used
    assert got[200 - 7:200 + 8] == [7, 6, 5, 4, 3, 2, 1, 0, 17, 18, 19, 20, 21, 22, 23]
    past, future = got[:200][::-1], got[201:]  # |r| = 1 … 200
    assert all(a <= b for a, b in zip(past, past[1:])) and all(a <= b for a, b in zip(future, future[1:]))
    # every bucket is used except 16 (offset 0 of the positive half: r > 0 means n >= 1)
    assert sorted(set(got)) == [b for b in range(32) if b != 16]
    assert max(past) == 15 and min(future) == 17  # negative offsets never reach the other half


def test_unidirectional_buckets():
    rel = torch.arange(-300, 50)
    got = t5_bucket(rel, causal=True).tolist()
    assert got == [bucket_scalar(r, bidirectional=False) for r in range(-300, 50)]
    assert got[300 - 15] == 15 and got[300 - 16] == 16 and got[0] == 31
    assert all(b == 0 for b in got[300:])  # j >= i: bucket 0 (future is masked)


def test_table_shared_across_layers_and_counted_once():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="t5", d_model=D, n_heads=H, n_layers=3, dropout=0.0)
    tables = [enc.pe.layer(i).table for i in range(3)]
    assert all(t is tables[0] for t in tables)
    assert tables[0].shape == (32, H)
    assert len(list(enc.pe.parameters())) == 1
    n_layer_params = sum(p.numel() for p in enc.layers.parameters())
    assert sum(p.numel() for p in enc.parameters()) == n_layer_params + 32 * H + sum(
        p.numel() for p in enc.final_norm.parameters()
    )
    # gradients from every layer accumulate into the one table
    out, _ = enc(torch.randn(2, 20, D), torch.tensor([20, 9]))
    out.pow(2).sum().backward()
    assert tables[0].grad is not None and tables[0].grad.abs().sum() > 0
    # and survive a state_dict round trip as one tensor
    enc2 = build_encoder("transformer", pe="t5", d_model=D, n_heads=H, n_layers=3, dropout=0.0)
    enc2.load_state_dict(enc.state_dict())
    assert enc2.pe.layer(2).table is enc2.pe.layer(0).table
    assert torch.equal(enc2.pe.layer(0).table, tables[0])


def test_bias_values_and_offset_only():
    pe = build_positional("t5", d_model=D, n_heads=H, n_layers=1).layer(0)
    q = torch.zeros(1, H, 6, 8)
    b = pe.logits_bias(q, torch.arange(6), torch.arange(300))  # (1, H, 6, 300)
    assert b.shape == (1, H, 6, 300)
    assert torch.equal(b[0, :, 2, 2 + 64], pe.table[30])
    assert torch.equal(b[0, :, 5, 0], pe.table[5])
    shifted = pe.logits_bias(q, torch.arange(6) + 777, torch.arange(300) + 777)
    assert torch.equal(b, shifted)


def test_bias_added_after_scaling():
    """With zero queries the logits are exactly the bias, so the weights are softmax(E)."""
    pe = build_positional("t5", d_model=D, n_heads=H, n_layers=1).layer(0)
    mha = MultiHeadAttention(D, H).eval()
    with torch.no_grad():
        mha.in_proj.weight.zero_()
        mha.in_proj.bias.zero_()
        _, w = mha(torch.randn(1, 5, D), pe=pe, need_weights=True)
        expected = torch.softmax(pe.logits_bias(torch.zeros(1, H, 5, 8), torch.arange(5), torch.arange(5)), -1)
    assert torch.allclose(w, expected, atol=1e-6)


@pytest.mark.parametrize("bias_mode", ["sdpa", "explicit"])
def test_fast_path_matches_reference(bias_mode):
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="t5", d_model=D, n_heads=H, n_layers=2, dropout=0.0,
                        bias_mode=bias_mode).eval()
    x, lengths = torch.randn(3, 40, D), torch.tensor([40, 21, 4])
    with torch.no_grad():
        fast, _ = enc(x, lengths)
        for layer in enc.layers:
            layer.attn.use_reference = True
        ref, _ = enc(x, lengths)
    assert torch.allclose(fast, ref, atol=1e-5)


def test_relative_inside_longer_padded_input():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    pe = build_positional("t5", d_model=D, n_heads=H, n_layers=1, init_std=1.0).layer(0)
    T, s = 20, 150
    x = torch.randn(1, T, D)
    long = torch.cat((torch.randn(1, s, D), x, torch.zeros(1, 5, D)), dim=1)
    pad = torch.zeros(1, long.size(1), dtype=torch.bool)
    pad[:, s + T:] = True
    with torch.no_grad():
        _, w_short = mha(x, pe=pe, need_weights=True)
        _, w_long = mha(long, pad, pe=pe, need_weights=True)
    ls, ll = w_short.log(), w_long[..., s:s + T, s:s + T].log()
    assert torch.allclose(ls - ls[..., :1], ll - ll[..., :1], atol=1e-4)


def test_padded_batch_equals_one_by_one():
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe="t5", d_model=D, n_heads=H, n_layers=2, dropout=0.0).eval()
    x, lengths = torch.randn(2, 30, D), torch.tensor([30, 14])
    with torch.no_grad():
        out, _ = enc(x, lengths)
        alone, _ = enc(x[1:, :14], lengths[1:])
    assert torch.allclose(out[1, :14], alone[0], atol=1e-5)


def test_runs_at_20x_training_length_and_blocked_matches():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="t5", d_model=16, n_heads=2, n_layers=1, dropout=0.0).eval()
    x, lengths = torch.randn(1, 2000, 16), torch.tensor([2000])
    with torch.no_grad():
        full, _ = enc(x, lengths)
        enc.set_block_size(512)
        blocked, _ = enc(x, lengths)
    assert torch.isfinite(full).all()
    assert torch.allclose(full, blocked, atol=1e-5)


def test_bad_config_is_a_clear_error():
    with pytest.raises(ValueError, match="num_buckets"):
        T5RelativeBias(d_model=D, n_heads=H, num_buckets=7)
