"""wav2vec 2.0 conv PE: X + GELU(SamePad(Conv1d_wn(X))) with grouped, weight-normed
convolution; even kernels keep the length, padding never leaks into valid frames."""

import math

import pytest
import torch
import torch.nn.functional as F

from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import build_positional

D = 32


def conv(**kw):
    return build_positional("conv", d_model=D, n_heads=4, n_layers=1, **kw).input


def test_kernel_from_seconds_and_frames():
    assert conv(frame_shift_s=0.04).kernel == 64  # 2.56 s at 40 ms
    assert conv(frame_shift_s=0.02).kernel == 128  # wav2vec 2.0's own setting
    assert conv(kernel=7).kernel == 7
    with pytest.raises(ValueError, match="groups"):
        build_positional("conv", d_model=20, n_heads=4, n_layers=1)


def test_formula_against_explicit_convolution():
    torch.manual_seed(0)
    pe = conv(kernel=6, groups=4)
    x = torch.randn(2, 25, D)
    w = pe.conv.weight  # weight-normed weight (D, D/groups, k)
    y = F.conv1d(x.transpose(1, 2), w, pe.conv.bias, padding=3, groups=4)[..., :-1]  # SamePad
    expected = x + F.gelu(y).transpose(1, 2)
    assert torch.allclose(pe(x, torch.tensor([25, 25])), expected, atol=1e-6)


def test_weight_norm_over_kernel_dim_and_zero_bias():
    pe = conv(kernel=5)
    g = pe.conv.parametrizations.weight.original0
    v = pe.conv.parametrizations.weight.original1
    assert g.shape == (1, 1, 5)  # one gain per kernel tap (dim=2)
    w = pe.conv.weight
    assert torch.allclose(w, g * v / v.norm(dim=(0, 1), keepdim=True), atol=1e-6)
    assert torch.all(pe.conv.bias == 0)
    assert math.isclose(float(v.detach().std()), math.sqrt(4 / (5 * D)), rel_tol=0.2)


@pytest.mark.parametrize("kernel", [1, 4, 5, 64])
def test_length_kept_for_even_and_odd_kernels(kernel):
    pe = conv(kernel=kernel)
    for T in (1, 3, 40):
        assert pe(torch.randn(2, T, D), torch.tensor([T, 1])).shape == (2, T, D)


def test_padding_does_not_leak():
    torch.manual_seed(0)
    pe = conv(kernel=8)
    x = torch.randn(2, 30, D)
    x[1, 12:] = 1e3  # garbage in the padded frames
    y = pe(x, torch.tensor([30, 12]))
    alone = pe(x[1:, :12], torch.tensor([12]))
    assert torch.allclose(y[1, :12], alone[0], atol=1e-5)


def test_gradients_reach_all_parameters():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="conv", d_model=D, n_heads=4, n_layers=1, dropout=0.0, kernel=6)
    out, _ = enc(torch.randn(2, 20, D), torch.tensor([20, 9]))
    out.pow(2).sum().backward()
    params = dict(enc.pe.named_parameters())
    assert len(params) == 3  # gain, direction, bias
    for name, p in params.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_fused_matches_reference_and_padded_batch():
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe="conv", d_model=D, n_heads=4, n_layers=2, dropout=0.0, kernel=10).eval()
    x, lengths = torch.randn(2, 30, D), torch.tensor([30, 13])
    with torch.no_grad():
        out, _ = enc(x, lengths)
        alone, _ = enc(x[1:, :13], lengths[1:])
        for layer in enc.layers:
            layer.attn.use_reference = True
        ref, _ = enc(x, lengths)
    assert torch.allclose(out[1, :13], alone[0], atol=1e-5)
    assert torch.allclose(out, ref, atol=1e-5)


def test_runs_at_20x_training_length():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="conv", d_model=D, n_heads=4, n_layers=1, dropout=0.0).eval()
    with torch.no_grad():
        out, _ = enc(torch.randn(1, 2000, D), torch.tensor([2000]))
    assert out.shape == (1, 2000, D) and torch.isfinite(out).all()
