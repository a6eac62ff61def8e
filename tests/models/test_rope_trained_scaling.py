"""RoPE rescalings trained in (pe.attention.scaling, pe=rope_pi / rope_yarn): the fixed factor's
mathematics (PI: angle at p·s equals the plain angle at p; YaRN: high frequencies kept, low ones
interpolated, a linear ramp in rotations between α and β), the α / β numbers the docstring states
for 40 ms frames, the config's refusals, and a remedy that would replace it refused."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from asr_pe.inference.remedies import RemedyError, check_remedies, parse_remedies
from asr_pe.models.asr import build_asr_model
from asr_pe.models.positional.base import UnknownPEError
from asr_pe.models.positional.rope import RoPE, trained_scaling

CONF = Path(__file__).resolve().parents[2] / "conf"
SHIFT = 0.04  # the study's encoder frame: 10 ms fbank frames, 4x front end


def _rope(scaling=None, d_model=144, n_heads=4):
    return RoPE(d_model, n_heads, frame_shift_s=SHIFT, scaling=scaling)


def _pe_yaml(option: str) -> dict:
    spec = OmegaConf.to_container(OmegaConf.load(CONF / "pe" / f"{option}.yaml"))
    return spec["attention"]["scaling"]


def test_pi_angle_at_p_times_s_equals_plain_angle_at_p():
    plain, pi = _rope(), _rope({"kind": "pi", "train_seconds": 5.0, "target_seconds": 40.0})
    p = torch.arange(0, 1000, dtype=torch.float32)
    for n_keys in (10, 125, 1000, 4000):  # a fixed factor: the same at every input length, short ones too
        freq, pos_factor, logit = pi.scaled_frequencies(n_keys)
        assert pos_factor == pytest.approx(1 / 8) and logit == 1.0
        torch.testing.assert_close(pi.angles(p * 8, freq, pos_factor), plain.angles(p), rtol=1e-6, atol=1e-4)
    # the same through the rotation of q / k, and not the plain rotation (the factor does act)
    x = torch.randn(1, 4, 50, 36)
    pos = torch.arange(50)
    q_pi, _ = pi.transform_qk(x, x, pos * 8, pos * 8)
    q_plain, _ = plain.transform_qk(x, x, pos, pos)
    torch.testing.assert_close(q_pi, q_plain, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(pi.transform_qk(x, x, pos, pos)[0], q_plain, atol=1e-3)


def _rotations(rope: RoPE, train_frames: int) -> torch.Tensor:
    return train_frames * rope.inv_freq / (2 * math.pi)  # r_k = L_tr / λ_k


def test_yarn_keeps_high_frequencies_interpolates_low_ramps_between():
    spec = {"kind": "yarn", "train_seconds": 5.0, "target_seconds": 40.0, "alpha": 1.0, "beta": 10.0}
    yarn, plain = _rope(spec), _rope()
    s = 8.0
    freq, pos_factor, logit = yarn.scaled_frequencies(10)  # a fixed factor: even a 10-frame input
    assert pos_factor == 1.0 and logit == pytest.approx((0.1 * math.log(s) + 1) ** 2)
    theta = plain.inv_freq
    r = _rotations(plain, 125)
    kept, interpolated = r >= 10.0, r <= 1.0
    ramp = ~kept & ~interpolated
    assert kept.sum() == 2 and ramp.sum() == 4 and interpolated.sum() == 12
    torch.testing.assert_close(freq[kept], theta[kept])
    torch.testing.assert_close(freq[interpolated], theta[interpolated] / s)
    # on the ramp θ' = (1 − γ)·θ/s + γ·θ with γ linear in the rotations: γ = (r − α) / (β − α)
    gamma = (freq / theta - 1 / s) / (1 - 1 / s)
    torch.testing.assert_close(gamma[ramp], (r[ramp] - 1.0) / 9.0, rtol=1e-5, atol=1e-6)
    assert ((gamma[ramp] > 0) & (gamma[ramp] < 1)).all()
    # frequencies only fall, and every one stays between θ/s and θ
    assert (freq <= theta + 1e-9).all() and (freq >= theta / s - 1e-9).all()


def test_the_docstring_numbers_for_40_ms_frames():
    """rope.py states them: 125 frames of 5 s, r_0 = 19.9, r_1 = 11.9, r_6 = 0.92, r_17 = 0.003, and
    that β = 32 (the language-model default) would keep no frequency."""
    r = _rotations(_rope(), round(5.0 / SHIFT))
    assert r.numel() == 18
    assert r[0].item() == pytest.approx(19.9, abs=0.05) and r[1].item() == pytest.approx(11.9, abs=0.05)
    assert r[5].item() == pytest.approx(1.5, abs=0.05) and r[6].item() == pytest.approx(0.92, abs=0.01)
    assert r[17].item() == pytest.approx(0.003, abs=0.0005)
    assert (r < 32).all()
    # 2π frames of 40 ms: the shortest wavelength is 0.25 s; β = 10 keeps wavelengths up to 0.5 s
    assert 2 * math.pi * SHIFT == pytest.approx(0.251, abs=0.001)
    assert 5.0 / 10.0 == 0.5 and (2 * math.pi / _rope().inv_freq[1]).item() * SHIFT < 0.5


def test_the_configs_give_factor_8_and_the_stated_alpha_beta():
    pi, yarn = trained_scaling(_pe_yaml("rope_pi"), SHIFT), trained_scaling(_pe_yaml("rope_yarn"), SHIFT)
    assert (pi.kind, pi.factor, pi.train_frames) == ("pi", 8.0, 125)
    assert (yarn.kind, yarn.factor, yarn.yarn_alpha, yarn.yarn_beta) == ("yarn", 8.0, 1.0, 10.0)
    assert trained_scaling(None, SHIFT) is None and trained_scaling({"kind": "none"}, SHIFT) is None


@pytest.mark.parametrize("spec, match", [
    ({"kind": "ntk", "train_seconds": 5, "target_seconds": 40}, "kind must be one of"),
    ({"kind": "pi", "train_seconds": 5}, "needs train_seconds and target_seconds"),
    ({"kind": "pi", "train_seconds": 40, "target_seconds": 5}, "train_seconds <= target_seconds"),
    ({"kind": "pi", "train_seconds": 5, "target_seconds": 40, "factor": 3}, "unknown key"),
])
def test_bad_scaling_configs_are_one_clear_error(spec, match):
    with pytest.raises(UnknownPEError, match=match):
        _rope(spec)


def test_a_rope_remedy_on_a_model_trained_with_a_rescaling_is_refused():
    pe = {"name": "rope_pi", "attention": {"name": "rope", "scaling": _pe_yaml("rope_pi")}}
    model = build_asr_model(vocab_size=11, in_features=16, frontend={"kind": "conv1d"},
                            encoder={"kind": "transformer", "d_model": 32, "n_heads": 4, "n_layers": 2}, pe=pe)
    hooks = [h for h in model.encoder.pe.attention if isinstance(h, RoPE)]
    assert hooks and all(h.scaling is not None and h.scaling.factor == 8.0 for h in hooks)
    with pytest.raises(RemedyError, match="trained with a RoPE rescaling"):
        check_remedies(model, parse_remedies("rope_yarn"), "rope_pi")
    check_remedies(model, parse_remedies("window:5"), "rope_pi")  # the window still applies
