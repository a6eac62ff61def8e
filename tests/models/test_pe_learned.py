"""Learned absolute table: X + E[p]; past max_len the policy decides (error with a clear
message / clamp to the last row / wrap as p mod (max_len − 1))."""

import pytest
import torch

from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import UnknownPEError, build_positional
from asr_pe.models.positional.learned import PositionLimitError

D = 16


def learned(**kw):
    return build_positional("learned", d_model=D, n_heads=2, n_layers=1, **kw).input


def test_adds_table_rows():
    pe = learned(max_len=10)
    x = torch.randn(2, 7, D)
    y = pe(x, torch.tensor([7, 4]))
    assert torch.allclose(y, x + pe.table[:7][None])
    scaled = learned(max_len=10, xscale=4.0)
    scaled.table.data.copy_(pe.table.data)
    assert torch.allclose(scaled(x, torch.tensor([7, 4])), 4 * x + pe.table[:7][None])


def test_error_policy_names_length_and_limit():
    pe = learned(max_len=50)
    with pytest.raises(PositionLimitError) as e:
        pe(torch.randn(1, 51, D), torch.tensor([51]))
    msg = str(e.value)
    assert "51" in msg and "max_len=50" in msg and "policy" in msg
    pe(torch.randn(1, 50, D), torch.tensor([50]))  # exactly the table: fine


def test_error_policy_counts_valid_frames_only():
    pe = learned(max_len=50)
    x = torch.randn(2, 60, D)  # padded past the table, but no utterance is longer than 50
    y = pe(x, torch.tensor([50, 20]))
    assert torch.allclose(y[:, :50], x[:, :50] + pe.table[None])


def test_clamp_policy():
    pe = learned(max_len=8, policy="clamp")
    assert pe.positions(12).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7]
    x = torch.zeros(1, 12, D)
    y = pe(x, torch.tensor([12]))
    assert torch.allclose(y[0, 11], pe.table[7]) and torch.allclose(y[0, 7], pe.table[7])


def test_wrap_policy():
    pe = learned(max_len=8, policy="wrap")
    # inside the table unchanged; past it p mod 7 (CAPE's flashlight baseline)
    assert pe.positions(20).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5]
    y = pe(torch.zeros(1, 20, D), torch.tensor([20]))
    assert torch.allclose(y[0, 14], pe.table[0]) and torch.allclose(y[0, 9], pe.table[2])


def test_bad_policy_and_option_are_clear_errors():
    with pytest.raises(ValueError, match="policy"):
        learned(policy="extrapolate")
    with pytest.raises(UnknownPEError, match="max_length"):
        learned(max_length=10)


def test_gradients_reach_table_rows_used():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="learned", d_model=D, n_heads=2, n_layers=1, dropout=0.0, max_len=64)
    out, _ = enc(torch.randn(2, 30, D), torch.tensor([30, 12]))
    out.pow(2).sum().backward()
    g = enc.pe.input.table.grad
    assert g[:30].abs().sum(-1).gt(0).all() and g[30:].abs().sum() == 0


def test_fused_matches_reference_and_padded_batch():
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe="learned", d_model=D, n_heads=2, n_layers=2, dropout=0.0).eval()
    x, lengths = torch.randn(2, 30, D), torch.tensor([30, 13])
    with torch.no_grad():
        out, _ = enc(x, lengths)
        alone, _ = enc(x[1:, :13], lengths[1:])
        for layer in enc.layers:
            layer.attn.use_reference = True
        ref, _ = enc(x, lengths)
    assert torch.allclose(out[1, :13], alone[0], atol=1e-5)
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("policy", ["clamp", "wrap"])
def test_runs_at_20x_table_length_with_a_policy(policy):
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="learned", d_model=D, n_heads=2, n_layers=1, dropout=0.0,
                        max_len=100, policy=policy).eval()
    with torch.no_grad():
        out, _ = enc(torch.randn(1, 2000, D), torch.tensor([2000]))
    assert torch.isfinite(out).all()
    enc_err = build_encoder("transformer", pe="learned", d_model=D, n_heads=2, n_layers=1, max_len=100)
    with pytest.raises(PositionLimitError, match="2000 frames"):
        enc_err(torch.randn(1, 2000, D), torch.tensor([2000]))
