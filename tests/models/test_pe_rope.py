"""RoPE: rotations preserve norms, q_iᵀk_j depends only on i − j, the two pair layouts are
the same map up to a permutation, and attention stays on the fused SDPA path."""

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention
from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.rope import RoPE

D, H = 32, 4
d = D // H


def rope(**kw) -> RoPE:
    return build_positional("rope", d_model=D, n_heads=H, n_layers=1, **kw).layer(0)


def test_rotation_angles_match_formula():
    pe = rope()
    ang = pe.angles(torch.tensor([0, 1, 7]))
    theta = torch.tensor([10000.0 ** (-2 * k / d) for k in range(d // 2)])
    assert torch.allclose(ang, torch.tensor([0.0, 1.0, 7.0])[:, None] * theta[None], atol=1e-6)
    # a single pair: position 1 rotates (x_0, x_{d/2}) by θ_0 = 1 rad
    x = torch.zeros(1, 1, 2, d)
    x[..., 0] = 1.0
    y = pe.rotate(x, torch.tensor([0, 1]))
    assert torch.allclose(y[0, 0, 0], x[0, 0, 0])
    assert torch.allclose(y[0, 0, 1, 0], torch.tensor(math.cos(1.0)), atol=1e-6)
    assert torch.allclose(y[0, 0, 1, d // 2], torch.tensor(math.sin(1.0)), atol=1e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotation_preserves_norms(interleaved):
    pe = rope(interleaved=interleaved)
    x = torch.randn(2, H, 300, d)
    pos = torch.arange(300) * 17
    y = pe.rotate(x, pos)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5)
    assert not torch.allclose(y[:, :, 1:], x[:, :, 1:], atol=1e-3)


@pytest.mark.parametrize("interleaved", [False, True])
def test_scores_depend_only_on_offset(interleaved):
    pe = rope(interleaved=interleaved)
    # the same content at every position: S[i, j] must be a function of i − j (Toeplitz)
    u, w = torch.randn(1, H, 1, d), torch.randn(1, H, 1, d)
    T = 64
    pos = torch.arange(T)
    q, k = pe.transform_qk(u.expand(1, H, T, d), w.expand(1, H, T, d), pos, pos)
    S = q @ k.transpose(-1, -2)  # (1, H, T, T)
    assert torch.allclose(S[..., 1:, 1:], S[..., :-1, :-1], atol=1e-4)
    assert not torch.allclose(S[..., 0, 1], S[..., 1, 0], atol=1e-3)  # but i − j and j − i differ
    # arbitrary content, shifted positions: identical scores
    q0, k0 = torch.randn(2, H, T, d), torch.randn(2, H, T, d)
    a = pe.transform_qk(q0, k0, pos, pos)
    b = pe.transform_qk(q0, k0, pos + 1234, pos + 1234)
    assert torch.allclose(a[0] @ a[1].transpose(-1, -2), b[0] @ b[1].transpose(-1, -2), atol=1e-3)


def test_interleaved_equals_rotate_half_up_to_permutation():
    half, inter = rope(interleaved=False), rope(interleaved=True)
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))  # interleaved -> halves
    x = torch.randn(2, H, 50, d)
    pos = torch.arange(50)
    assert torch.allclose(inter.rotate(x, pos)[..., perm], half.rotate(x[..., perm], pos), atol=1e-6)


def test_continuous_time_positions():
    pe = rope(time_scale=25.0, frame_shift_s=0.04)  # 0.04 s · 25 = 1 unit per frame
    ref = rope()
    x = torch.randn(1, H, 10, d)
    assert torch.allclose(pe.rotate(x, torch.arange(10)), ref.rotate(x, torch.arange(10)), atol=1e-5)
    slow = rope(time_scale=12.5, frame_shift_s=0.04)
    assert torch.allclose(slow.rotate(x, torch.arange(0, 20, 2)), ref.rotate(x, torch.arange(10)), atol=1e-5)


def test_angles_fp32_and_dtype_kept():
    pe = rope()
    x = torch.randn(1, H, 8, d, dtype=torch.bfloat16)
    y = pe.rotate(x, torch.arange(8) + 10**6)
    assert y.dtype == torch.bfloat16
    assert pe.angles(torch.arange(3)).dtype == torch.float32


def test_stays_on_fused_path_and_matches_reference():
    pe = rope()
    assert pe.fused_ok and pe.logits_bias(torch.zeros(1, H, 3, d), torch.arange(3), torch.arange(3)) is None
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="rope", d_model=D, n_heads=H, n_layers=2, dropout=0.0).eval()
    x, lengths = torch.randn(3, 40, D), torch.tensor([40, 33, 7])
    with torch.no_grad():
        fused, _ = enc(x, lengths)
        for layer in enc.layers:
            layer.attn.use_reference = True
        ref, _ = enc(x, lengths)
    assert torch.allclose(fused, ref, atol=1e-5)


def test_relative_inside_longer_padded_input():
    """Same content after a random prefix (and with trailing padding): the attention
    log-weight differences over that content are unchanged."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    pe = rope()
    T, s = 20, 13
    x = torch.randn(1, T, D)
    long = torch.cat((torch.randn(1, s, D), x, torch.zeros(1, 6, D)), dim=1)
    pad = torch.zeros(1, long.size(1), dtype=torch.bool)
    pad[:, s + T:] = True
    with torch.no_grad():
        _, w_short = mha(x, pe=pe, need_weights=True)
        _, w_long = mha(long, pad, pe=pe, need_weights=True)
    ls = w_short.log()
    ll = w_long[..., s:s + T, s:s + T].log()
    assert torch.allclose(ls - ls[..., :1], ll - ll[..., :1], atol=1e-4)


def test_padded_batch_equals_one_by_one():
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe="rope", d_model=D, n_heads=H, n_layers=2, dropout=0.0).eval()
    x, lengths = torch.randn(2, 30, D), torch.tensor([30, 17])
    with torch.no_grad():
        out, _ = enc(x, lengths)
        alone, _ = enc(x[1:, :17], lengths[1:])
    assert torch.allclose(out[1, :17], alone[0], atol=1e-5)


def test_runs_at_20x_training_length_and_blocked_matches():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="rope", d_model=16, n_heads=2, n_layers=1, dropout=0.0).eval()
    x, lengths = torch.randn(1, 2000, 16), torch.tensor([2000])
    with torch.no_grad():
        full, _ = enc(x, lengths)
        enc.set_block_size(512)
        blocked, _ = enc(x, lengths)
    assert torch.isfinite(full).all()
    assert torch.allclose(full, blocked, atol=1e-5)
