"""Encoders and front ends: shapes, lengths, padding never changes valid outputs."""

import pytest
import torch

from asr_pe.models import build_encoder
from asr_pe.models.asr import build_asr_model
from asr_pe.models.frontend import Conv1dSubsampling, Conv2dSubsampling


@pytest.mark.parametrize("kind,norm_first", [("transformer", True), ("transformer", False), ("conformer", True)])
def test_padded_batch_equals_one_by_one(kind, norm_first):
    torch.manual_seed(0)
    enc = build_encoder(kind=kind, pe="sinusoidal", d_model=32, n_heads=4, n_layers=2, norm_first=norm_first).eval()
    x = torch.randn(3, 40, 32)
    lengths = torch.tensor([40, 23, 7])
    out, out_len = enc(x, lengths)
    assert out.shape == (3, 40, 32) and out_len.tolist() == lengths.tolist()
    for b in range(3):
        n = int(lengths[b])
        single, _ = enc(x[b:b + 1, :n], lengths[b:b + 1])
        assert torch.allclose(single[0], out[b, :n], atol=1e-5), f"utterance {b} changed by padding"
        assert (out[b, n:] == 0).all(), "padded frames are zeroed"


def test_return_attention_shapes_and_same_output():
    enc = build_encoder(kind="conformer", pe="none", d_model=32, n_heads=4, n_layers=3).eval()
    x, lengths = torch.randn(2, 11, 32), torch.tensor([11, 5])
    out, _ = enc(x, lengths)
    out2, _, attn = enc(x, lengths, return_attention=True)
    assert torch.allclose(out, out2, atol=1e-5)
    assert len(attn) == 3 and all(a.shape == (2, 4, 11, 11) for a in attn)


def test_unknown_encoder_kind():
    with pytest.raises(ValueError, match="unknown encoder kind"):
        build_encoder(kind="lstm", d_model=32, n_heads=4, n_layers=1)


@pytest.mark.parametrize("frontend", [Conv2dSubsampling(80, 32, factor=4), Conv2dSubsampling(80, 32, factor=6),
                                      Conv2dSubsampling(80, 32, factor=8), Conv2dSubsampling(80, 32, context_kernel=5),
                                      Conv1dSubsampling(80, 32), Conv1dSubsampling(80, 32, context_kernel=3)])
def test_frontend_lengths_match_convolution(frontend):
    frontend.eval()
    for T in range(frontend.min_input_frames(), 60, 7):
        y, n = frontend(torch.randn(1, T, 80), torch.tensor([T]))
        assert y.shape[1] == int(n[0]), f"T={T}: conv gave {y.shape[1]} frames, output_lengths {int(n[0])}"


@pytest.mark.parametrize("fe", [Conv2dSubsampling(80, 32), Conv2dSubsampling(80, 32, context_kernel=5),
                                Conv1dSubsampling(80, 32), Conv1dSubsampling(80, 32, context_kernel=5)])
def test_frontend_padding_does_not_leak(fe):
    fe.eval()
    x = torch.randn(2, 50, 80)
    lengths = torch.tensor([50, 31])
    y, n = fe(x, lengths)
    y1, n1 = fe(x[1:, :31], lengths[1:])
    assert int(n1[0]) == int(n[1])
    assert torch.allclose(y[1, : int(n[1])], y1[0], atol=1e-5)


def test_frontend_context_kernel_widens_receptive_field():
    """Frame t of a k-context front end depends on input frames 4t-2(k-1) .. 4t+6+2(k-1), no more."""
    fe = Conv2dSubsampling(80, 16, channels=8, context_kernel=3).eval()
    x = torch.randn(1, 80, 80, requires_grad=True)
    y, _ = fe(x, torch.tensor([80]))
    y[0, 8].sum().backward()  # output frame 8: plain receptive field is input frames 32..38
    touched = (x.grad[0].abs().sum(-1) > 0).nonzero().flatten()
    assert touched.min().item() == 32 - 4 and touched.max().item() == 38 + 4, touched.tolist()


def test_frontend_too_short_is_clear():
    with pytest.raises(ValueError, match="receptive field"):
        Conv2dSubsampling(80, 32)(torch.randn(1, 5, 80), torch.tensor([5]))


def test_asr_model_ctc_shapes():
    m = build_asr_model(vocab_size=30, in_features=80, frontend={"kind": "conv2d", "channels": 8},
                        encoder={"kind": "transformer", "d_model": 32, "n_heads": 4, "n_layers": 1},
                        pe={"name": "sinusoidal", "input": {"name": "sinusoidal"}}).eval()
    enc, n = m.encode(torch.randn(2, 100, 80), torch.tensor([100, 60]))
    lp = m.ctc_log_probs(enc)
    assert lp.shape == (2, 24, 30) and n.tolist() == [24, 14]
    assert torch.allclose(lp.exp().sum(-1), torch.ones(2, 24), atol=1e-5)


def test_d_model_not_divisible_by_heads_names_both_keys():
    import pytest

    from asr_pe.models.encoder import EncoderConfigError, build_encoder

    with pytest.raises(EncoderConfigError, match=r"encoder.d_model=100 is not divisible by encoder.n_heads=3.*\[1, 2, 4, 5, 10\]"):
        build_encoder("transformer", pe="none", d_model=100, n_heads=3, n_layers=1)
