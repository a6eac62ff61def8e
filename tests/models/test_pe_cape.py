"""CAPE: positions in seconds centred over the valid frames; in training a global shift,
a per-frame local shift and a global log-uniform scaling, each inside its configured range
and each switchable; evaluation is deterministic centring only."""

import math

import pytest
import torch

from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.sinusoidal import sinusoid

D, DT = 16, 0.04


def cape(**kw):
    return build_positional("cape", d_model=D, n_heads=2, n_layers=1, frame_shift_s=DT, **kw).input


def centred(lengths, T):
    """(t − (n − 1)/2)·Δt on valid frames, 0 on padding — written from the definition."""
    out = torch.zeros(len(lengths), T)
    for b, n in enumerate(lengths.tolist()):
        p = torch.arange(n, dtype=torch.float64) * DT
        out[b, :n] = (p - p.mean()).float()
    return out


def test_eval_is_centred_deterministic_and_padding_free():
    pe = cape().eval()
    lengths = torch.tensor([50, 17, 1])
    a = pe.positions(lengths, 50)
    assert torch.equal(a, pe.positions(lengths, 50))
    assert torch.allclose(a, centred(lengths, 50), atol=1e-6)
    for b, n in enumerate(lengths.tolist()):
        assert abs(float(a[b, :n].mean())) < 1e-6  # mean over VALID frames is 0
    # more padding does not move any valid position
    more = pe.positions(lengths, 90)
    assert torch.equal(more[:, :50], a) and torch.all(more[:, 50:] == 0)


def test_eval_forward_formula():
    pe = cape(xscale=2.0).eval()
    x, lengths = torch.randn(2, 12, D), torch.tensor([12, 5])
    expected = 2.0 * x + sinusoid(centred(lengths, 12) * 30.0, D)
    assert torch.allclose(pe(x, lengths), expected, atol=1e-5)


def test_train_positions_inside_ranges_and_random():
    torch.manual_seed(0)
    pe = cape().train()
    n = 60
    lengths = torch.full((4000,), n)
    p = pe.positions(lengths, n)
    base = centred(lengths[:1], n)[0]
    # p' = λ(p + δ + ε): the mean over frames is λ(δ + mean ε) and consecutive steps are
    # λ(Δt + ε_{t+1} − ε_t) ∈ [0, 2λΔt] for ε_max = ½ frame
    mean = p.mean(1)
    assert mean.abs().max() <= 1.1 * (30 + 0.5 * DT) + 1e-4
    assert mean.max() > 25 and mean.min() < -25  # the shift covers its range
    steps = p.diff(dim=1)
    assert steps.min() >= -1e-5 and steps.max() <= 2 * 1.1 * DT + 1e-5
    # the spread of an utterance is the centred spread times λ ∈ [1/1.1, 1.1], up to ε
    spread = (p[:, -1] - p[:, 0]) / (base[-1] - base[0])
    slack = 2 * 0.5 * DT / float(base[-1] - base[0]) * 1.1
    assert spread.min() >= 1 / 1.1 - slack and spread.max() <= 1.1 + slack
    assert spread.min() < 0.93 and spread.max() > 1.07
    assert not torch.equal(p, pe.positions(lengths, n))  # a new draw every call


def test_each_augmentation_alone_and_off():
    lengths = torch.tensor([40, 25])
    base = centred(lengths, 40)
    valid = base != 0
    valid[:, 0] = True
    off = dict(max_global_shift=0, max_local_shift=None, max_global_scaling=1)

    only_shift = cape(**{**off, "max_global_shift": 5.0}).train().positions(lengths, 40)
    delta = (only_shift - base)[:, :1]  # one shift per utterance
    assert torch.allclose((only_shift - base)[valid.nonzero(as_tuple=True)],
                          delta.expand_as(base)[valid.nonzero(as_tuple=True)], atol=1e-5)
    assert delta.abs().max() <= 5.0 and delta[0] != delta[1]

    only_local = cape(**{**off, "max_local_shift": 0.5}).train().positions(lengths, 40)
    eps = (only_local - base)[0]
    assert eps.abs().max() <= 0.5 * DT + 1e-6 and eps.std() > 0.1 * DT

    only_scale = cape(**{**off, "max_global_scaling": 1.2}).train().positions(lengths, 40)
    lam = only_scale[:, 0] / base[:, 0]
    assert torch.allclose(only_scale, base * lam[:, None], atol=1e-5)
    assert (lam >= 1 / 1.2 - 1e-6).all() and (lam <= 1.2 + 1e-6).all()

    none = cape(**off).train().positions(lengths, 40)
    assert torch.allclose(none, base, atol=1e-6)


def test_train_padding_does_not_move_valid_positions():
    lengths = torch.tensor([30, 12])
    pe = cape(max_local_shift=0).train()  # δ and λ are per utterance and drawn first
    torch.manual_seed(3)
    a = pe.positions(lengths, 30)
    torch.manual_seed(3)
    b = pe.positions(lengths, 70)
    assert torch.allclose(a, b[:, :30]) and torch.all(b[:, 30:] == 0) and torch.all(a[1, 12:] == 0)
    # centring uses valid frames only: without the shift, λ scaling keeps the valid mean at 0
    pe = cape(max_global_shift=0, max_local_shift=0).train()
    p = pe.positions(lengths, 30)
    assert abs(float(p[1, :12].mean())) < 1e-5


def test_bad_ranges_are_clear_errors():
    with pytest.raises(ValueError, match="max_global_scaling"):
        cape(max_global_scaling=0.5)
    with pytest.raises(ValueError, match="max_global_shift"):
        cape(max_global_shift=-1.0)


def test_encoder_paths_padding_and_20x():
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe="cape", d_model=D, n_heads=2, n_layers=2, dropout=0.0).eval()
    x, lengths = torch.randn(2, 30, D), torch.tensor([30, 11])
    with torch.no_grad():
        out, _ = enc(x, lengths)
        alone, _ = enc(x[1:, :11], lengths[1:])
        for layer in enc.layers:
            layer.attn.use_reference = True
        ref, _ = enc(x, lengths)
        assert torch.allclose(out[1, :11], alone[0], atol=1e-5)
        assert torch.allclose(out, ref, atol=1e-5)
        small = build_encoder("transformer", pe="cape", d_model=D, n_heads=2, n_layers=1, dropout=0.0).eval()
        long_out, _ = small(torch.randn(1, 2000, D), torch.tensor([2000]))
    assert torch.isfinite(long_out).all()
    # training mode changes the output (augmentation), eval mode does not
    enc.train()
    with torch.no_grad():
        t1, _ = enc(x, lengths)
        t2, _ = enc(x, lengths)
    assert not torch.allclose(t1, t2)
    assert math.isfinite(float(t1.sum()))
