"""Training-time position maps (random position scaling, randomized positions; position_maps.py):
what they draw, that they act in training only (or deterministically at evaluation), one draw per
forward shared by every layer, and that RoPE / relative / sinusoidal use the drawn positions
exactly (scores a function of p_i − p_j)."""

from __future__ import annotations

import math

import pytest
import torch

from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import UnknownPEError, build_positional
from asr_pe.models.positional.position_maps import PositionMap, build_position_map
from asr_pe.models.positional.relative import RelativePE
from asr_pe.models.positional.rope import RoPE
from asr_pe.models.positional.sinusoidal import SinusoidalPE, sinusoid

D, H = 32, 4


def test_scale_draws_lambda_times_t_in_training_only():
    pm = build_position_map({"kind": "scale", "range": [1, 32]}, 0.04)
    lengths = torch.tensor([10, 7, 10])
    g = torch.Generator().manual_seed(0)
    pos = pm.draw(lengths, 10, training=True, generator=g)  # (B, T)
    lam = pos[:, 1]
    assert bool(((lam >= 1) & (lam <= 32)).all())
    torch.testing.assert_close(pos, lam[:, None] * torch.arange(10.0)[None, :])
    assert pm.draw(lengths, 10, training=False) is None


def test_scale_is_log_uniform():
    pm = PositionMap("scale", scale_range=(1.0, 32.0))
    pos = pm.draw(torch.full((4000,), 2), 2, True, torch.Generator().manual_seed(1))
    logs = pos[:, 1].log() / math.log(32)  # U[0, 1] if log-uniform
    assert abs(float(logs.mean()) - 0.5) < 0.02 and abs(float((logs < 0.25).float().mean()) - 0.25) < 0.03


def test_randomized_draws_sorted_distinct_positions_in_range():
    pm = build_position_map({"kind": "randomized", "max_seconds": 4.0}, 0.04)  # 100 frames
    assert pm.max_frames == 100
    lengths = torch.tensor([30, 12])
    pos = pm.draw(lengths, 30, True, torch.Generator().manual_seed(0))
    for b, n in enumerate(lengths.tolist()):
        p = pos[b, :n]
        assert bool((p[1:] > p[:-1]).all()) and p.min() >= 0 and p.max() < 100
        assert bool((pos[b, n:] > p[-1]).all()), "padding sits past the last real position"
    again = pm.draw(lengths, 30, True, torch.Generator().manual_seed(1))
    assert not torch.equal(pos, again), "a training draw must change"
    e1, e2 = pm.draw(lengths, 30, False), pm.draw(lengths, 30, False)
    torch.testing.assert_close(e1, e2)  # evaluation: deterministic per length
    long = pm.draw(torch.tensor([150]), 150, False)
    torch.testing.assert_close(long[0], torch.arange(150.0))  # longer than the range: plain positions


@pytest.mark.parametrize("spec, match", [
    ({"kind": "shift"}, "kind must be one of"),
    ({"kind": "scale"}, "range"),
    ({"kind": "scale", "range": [2, 1]}, "lo <= hi"),
    ({"kind": "randomized"}, "max_seconds"),
    ({"kind": "scale", "range": [1, 2], "extra": 1}, "unknown keys"),
])
def test_bad_specs_are_named(spec, match):
    with pytest.raises(ValueError, match=match):
        build_position_map(spec, 0.04)


def test_only_pes_that_read_the_positions_take_a_position_map():
    with pytest.raises(UnknownPEError, match="position_map"):
        build_positional({"attention": {"name": "t5", "position_map": {"kind": "scale", "range": [1, 2]}}},
                         d_model=D, n_heads=H, n_layers=1)


def test_one_draw_per_forward_shared_by_every_layer():
    spec = {"attention": {"name": "rope", "position_map": {"kind": "scale", "range": [1, 32]}}}
    enc = build_encoder("transformer", pe=spec, d_model=D, n_heads=H, n_layers=3).train()
    x, lengths = torch.randn(2, 20, D), torch.tensor([20, 15])
    enc(x, lengths)
    drawn = [enc.pe.layer(i).drawn_positions for i in range(3)]
    assert drawn[0] is not None and all(d is drawn[0] for d in drawn)
    enc.eval()
    enc(x, lengths)
    assert all(enc.pe.layer(i).drawn_positions is None for i in range(3))


def test_rope_uses_the_drawn_positions_exactly():
    pe = RoPE(D, H)
    torch.manual_seed(0)
    q, k = torch.randn(2, H, 12, D // H), torch.randn(2, H, 12, D // H)
    pos = torch.arange(12)
    drawn = torch.stack([torch.arange(12.0) * 3.5, torch.randperm(100)[:12].sort().values.float()])  # (B, T)
    pe.drawn_positions = drawn
    qr, kr = pe.transform_qk(q, k, pos, pos)
    for b in range(2):
        torch.testing.assert_close(qr[b], pe.rotate(q[b:b + 1], drawn[b])[0])
        torch.testing.assert_close(kr[b], pe.rotate(k[b:b + 1], drawn[b])[0])
    pe.drawn_positions = torch.arange(12.0)[None].expand(2, 12)
    plain = RoPE(D, H).transform_qk(q, k, pos, pos)
    torch.testing.assert_close(pe.transform_qk(q, k, pos, pos)[0], plain[0])


def test_relative_bias_of_drawn_positions_is_the_table_entry_of_p_i_minus_p_j():
    torch.manual_seed(1)
    pe = RelativePE(D, H)
    q = torch.randn(2, H, 9, D // H)
    pos = torch.arange(9)
    plain = pe.logits_bias(q, pos, pos)
    pe.drawn_positions = torch.arange(9.0)[None].expand(2, 9)
    torch.testing.assert_close(pe.logits_bias(q, pos, pos), plain, atol=1e-5, rtol=1e-5)
    drawn = torch.stack([torch.arange(9.0) * 2.5, torch.randperm(50)[:9].sort().values.float()])
    pe.drawn_positions = drawn
    bias = pe.logits_bias(q, pos, pos)  # (B, H, 9, 9)
    qv = (q + pe.pos_bias_v[None, :, None, :]) / math.sqrt(D // H)
    for b in range(2):
        for i in (0, 4, 8):
            for j in (0, 3, 8):
                p = pe.position_table(torch.tensor([float(drawn[b, i] - drawn[b, j])]))  # (H, 1, d)
                expected = (qv[b, :, i] * p[:, 0]).sum(-1)  # (H,)
                torch.testing.assert_close(bias[b, :, i, j], expected, atol=1e-5, rtol=1e-5)


def test_relative_fused_qk_follows_the_drawn_positions():
    torch.manual_seed(2)
    pe = RelativePE(D, H)
    q, k = torch.randn(2, H, 7, D // H), torch.randn(2, H, 7, D // H)
    pos = torch.arange(7)
    pe.drawn_positions = torch.stack([torch.arange(7.0) * 3, torch.arange(7.0) * 0.5])
    qa, ka = pe.fused_qk(q, k, pos, pos)
    qu, _ = pe.transform_qk(q, k, pos, pos)
    expected = qu @ k.transpose(-2, -1) + pe.logits_bias(q, pos, pos) * math.sqrt(D // H)
    torch.testing.assert_close(qa @ ka.transpose(-2, -1), expected, atol=1e-4, rtol=1e-4)


def test_sinusoidal_with_a_map_trains_on_drawn_positions_and_evaluates_plain():
    pe = SinusoidalPE(D, position_map={"kind": "scale", "range": [2, 2]})  # λ = 2 exactly
    x, lengths = torch.zeros(1, 6, D), torch.tensor([6])
    pe.train()
    torch.testing.assert_close(pe(x, lengths)[0], sinusoid(torch.arange(6.0) * 2, D))
    pe.eval()
    torch.testing.assert_close(pe(x, lengths)[0], sinusoid(torch.arange(6.0), D))


@pytest.mark.parametrize("spec", [
    {"attention": {"name": "rope", "position_map": {"kind": "randomized", "max_seconds": 10}}},
    {"attention": {"name": "relative", "position_map": {"kind": "scale", "range": [1, 8]}}},
    {"input": {"name": "sinusoidal", "position_map": {"kind": "randomized", "max_seconds": 10}}},
])
def test_a_mapped_encoder_trains_and_evaluates(spec):
    torch.manual_seed(3)
    enc = build_encoder("transformer", pe=spec, d_model=D, n_heads=H, n_layers=2).train()
    x, lengths = torch.randn(2, 30, D, requires_grad=True), torch.tensor([30, 22])
    out, _ = enc(x, lengths)
    out.pow(2).mean().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    enc.eval()
    with torch.no_grad():
        a, _ = enc(x, lengths)
        b, _ = enc(x, lengths)
    torch.testing.assert_close(a, b)  # evaluation is deterministic


def test_the_encoder_option_reaches_the_stage_that_reads_positions():
    pm = {"kind": "scale", "range": [1, 4]}
    enc = build_encoder("transformer", pe="rope", d_model=D, n_heads=H, n_layers=1, position_map=pm)
    assert enc.pe.layer(0).position_map == PositionMap("scale", (1.0, 4.0))
    enc = build_encoder("transformer", pe="sinusoidal", d_model=D, n_heads=H, n_layers=1, position_map=pm)
    assert enc.pe.input.position_map == PositionMap("scale", (1.0, 4.0))
    with pytest.raises(UnknownPEError, match="reads no positions"):
        build_encoder("transformer", pe="alibi", d_model=D, n_heads=H, n_layers=1, position_map=pm)
