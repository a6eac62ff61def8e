"""Rotary position embedding (Su et al., "RoFormer", 2021, arXiv 2104.09864).

Each pair of query/key dimensions k is rotated by the angle p·θ_k, θ_k = base^(−2k/d),
base 10000, d the head width. Since R(a)ᵀR(b) = R(b − a), q_iᵀk_j depends on the content
and on i − j only, and a rotation preserves norms.

Pairing: ``interleaved=False`` (default) is the "rotate-half" layout (GPT-NeoX/LLaMA):
pair k = dimensions (k, k + d/2); ``interleaved=True`` is the paper's layout: pair k =
dimensions (2k, 2k + 1). They are the same map up to a fixed permutation of the head
dimensions (tested).

Positions: the integer frame index p, or with ``time_scale`` set, continuous time
p·Δt·time_scale (e.g. time_scale = 25 with Δt = 0.04 s gives back frame units).
Angles are computed in fp32 from the positions of each call: no table, no length cap.
Only q and k change, so attention stays on the fused SDPA path (``fused_ok``, no bias).

Inference remedies for inputs longer than training (``RoPE.scaling = RopeScaling(...)``, set by
``asr_pe/inference/remedies.py``; off by default). With L the number of keys of the call, L_tr
the training length in frames and s = L / L_tr, nothing changes for L <= L_tr, and beyond it:

* ``pi`` position interpolation (Chen et al. 2023, arXiv 2306.15595): p -> p / s, so every
  position lies in [0, L_tr);
* ``ntk`` NTK-aware base scaling (bloc97, 2023): base -> base·s^(d/(d−2)): the highest frequency
  θ_0 = 1 is kept and the lowest θ_{d/2−1} is divided by s exactly;
* ``yarn`` per-frequency interpolation (Peng et al. 2023, arXiv 2309.00071, "NTK-by-parts"):
  with r_k = L_tr / λ_k the number of periods λ_k = 2π/θ_k within the training length,
  γ_k = clamp((r_k − α)/(β − α), 0, 1) and θ_k -> (1 − γ_k)·θ_k/s + γ_k·θ_k (α = 1, β = 32:
  frequencies seen for fewer than one period are interpolated, those seen for more than 32 kept),
  and the logits are multiplied by (0.1·ln s + 1)² (the paper's √(1/t) on q and on k).

A trained rescaling (``pe.attention.scaling``, a model config: the RoPE options ``rope_pi`` /
``rope_yarn``): the papers' own use, a fixed factor s = target length / training length applied
at every input length, in fine-tuning on longer inputs and in every evaluation after it
(``RopeScaling.factor`` set; the same formulas with that s). Unlike the remedies it does not
depend on the input, so batches stay batched.

YaRN's α and β count rotations over the training length: r_k = L_tr / λ_k is unit-free, the
same whether L_tr and λ_k are in tokens, frames or seconds. What changes with the frame rate is
which r_k exist. Here a frame is 40 ms (the 4x front end over 10 ms fbank frames) and a head is
36 wide (d_model 144, 4 heads), so over the study's 5 s = 125 frames λ_0 = 2π frames = 0.25 s
gives r_0 = 19.9 rotations and r_17 = 0.003: no frequency turns 32 times, so the language-model
defaults (α = 1, β = 32, set for 4096 tokens with r_0 = 652) interpolate every one of them. In
seconds, β keeps the wavelengths shorter than L_tr / β and α fully interpolates those longer
than L_tr / α. The trained option sets β = 10 (wavelengths up to 0.5 s kept exactly: the ±0.5 s
neighbourhood where the study's RoPE model (seed 0) puts 79 % of its attention at 2-4 s, so the offsets
it relies on keep their angles: r_0, r_1 = 19.9, 11.9) and α = 1 (as the paper: a frequency
that did not complete one period within the 5 s is interpolated like PI: r_6 = 0.92 onwards);
r_2 ... r_5 (7.1 ... 1.5) are on the ramp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .base import AttentionPE, UnknownPEError, register_attention_pe
from .position_maps import build_position_map


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(…, d) -> (…, d): [x1, x2] -> [−x2, x1] with x1, x2 the two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


SCALINGS = ("pi", "ntk", "yarn")


@dataclass(frozen=True)
class RopeScaling:
    """An inference-time RoPE rescaling for inputs longer than ``train_frames`` (see the module doc)."""

    kind: str
    train_frames: int
    yarn_alpha: float = 1.0
    yarn_beta: float = 32.0
    # None: an inference remedy, s = input length / train_frames and only beyond it. A number:
    # a trained rescaling, s = factor at every input length (PI, YaRN as fine-tuned)
    factor: float | None = None

    def __post_init__(self):
        if self.kind not in SCALINGS:
            raise ValueError(f"rope scaling must be one of {SCALINGS}, got {self.kind!r}")
        if int(self.train_frames) < 1:
            raise ValueError(f"rope scaling needs a training length >= 1 frame, got {self.train_frames}")
        if not 0 <= self.yarn_alpha < self.yarn_beta:
            raise ValueError(f"yarn needs 0 <= alpha < beta, got {self.yarn_alpha}, {self.yarn_beta}")
        if self.factor is not None and not self.factor >= 1:
            raise ValueError(f"a trained rope scaling needs a factor >= 1 (target / training length), got {self.factor}")

    def factor_for(self, n_keys: int) -> float:
        """s for an input of ``n_keys`` frames: the fixed factor, or n_keys / train_frames beyond
        the training length (1 within it)."""
        if self.factor is not None:
            return float(self.factor)
        return max(1.0, n_keys / self.train_frames)


TRAINED_SCALINGS = ("pi", "yarn")


def trained_scaling(spec: dict | None, frame_shift_s: float) -> RopeScaling | None:
    """``pe.attention.scaling`` -> a fixed `RopeScaling`: ``{kind: pi | yarn, train_seconds,
    target_seconds[, alpha, beta]}`` (s = target / train seconds; YaRN's ramp over train_seconds
    in frames of ``frame_shift_s``); None or ``{kind: none}`` for plain RoPE."""
    if not spec or spec.get("kind") in (None, "none"):
        return None
    kind = spec.get("kind")
    if kind not in TRAINED_SCALINGS:
        raise UnknownPEError(f"pe.attention.scaling.kind must be one of {('none', *TRAINED_SCALINGS)}, got {kind!r}")
    unknown = sorted(set(spec) - {"kind", "train_seconds", "target_seconds", "alpha", "beta"})
    if unknown:
        raise UnknownPEError(f"pe.attention.scaling: unknown key(s) {unknown}; valid: kind, train_seconds, "
                         "target_seconds, alpha, beta")
    try:
        train_s, target_s = float(spec["train_seconds"]), float(spec["target_seconds"])
    except (KeyError, TypeError, ValueError):
        raise UnknownPEError("pe.attention.scaling needs train_seconds and target_seconds (numbers, seconds)") from None
    if not 0 < train_s <= target_s:
        raise UnknownPEError(f"pe.attention.scaling: need 0 < train_seconds <= target_seconds, got {train_s:g}, {target_s:g}")
    return RopeScaling(kind, max(1, round(train_s / frame_shift_s)), float(spec.get("alpha", 1.0)),
                       float(spec.get("beta", 32.0)), factor=target_s / train_s)


@register_attention_pe("rope")
class RoPE(AttentionPE):
    fused_ok = True
    family = "q/k rotation"
    scaling: RopeScaling | None = None  # an inference remedy; None: plain RoPE

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        frame_shift_s: float = 0.04,
        base: float = 10000.0,
        interleaved: bool = False,
        time_scale: float | None = None,
        causal: bool = False,
        position_map: dict | None = None,
        scaling: dict | None = None,
    ):
        super().__init__()
        assert d_model % n_heads == 0, f"rope: d_model {d_model} not divisible by n_heads {n_heads}"
        d = d_model // n_heads
        if d % 2 != 0:
            raise ValueError(f"rope: the head width d_model/n_heads = {d} must be even")
        self.d_head, self.base, self.interleaved = d, float(base), bool(interleaved)
        self.frame_shift_s = float(frame_shift_s)
        self.time_scale = None if time_scale is None else float(time_scale)
        self.causal = causal  # same rotation either way; the causal mask is the attention's job
        inv_freq = self.base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,) θ_k
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # a training-time remedy for long inputs (position_maps.py): positions drawn per forward
        self.position_map = build_position_map(position_map, self.frame_shift_s)
        # a trained rescaling (module doc), part of the model; the remedies may replace it for a
        # decoding and restore it after
        self.scaling = trained_scaling(scaling, self.frame_shift_s)

    def _position_unit(self) -> float:
        """Frames -> the positions the frequencies apply to (1, or Δt·time_scale)."""
        return 1.0 if self.time_scale is None else self.frame_shift_s * self.time_scale

    def scaled_frequencies(self, n_keys: int) -> tuple[torch.Tensor, float, float]:
        """(θ (d/2,), position factor, logit factor) for an input of ``n_keys`` frames: the
        plain ones (θ, 1, 1) unless ``scaling`` is set and n_keys exceeds its training length."""
        sc = self.scaling
        if sc is None or (sc.factor is None and n_keys <= sc.train_frames):
            return self.inv_freq, 1.0, 1.0
        s = sc.factor_for(n_keys)
        d = self.d_head
        if sc.kind == "pi":
            return self.inv_freq, 1.0 / s, 1.0
        if sc.kind == "ntk":
            if d <= 2:
                raise ValueError("rope ntk scaling needs a head width > 2")
            base = self.base * s ** (d / (d - 2))
            exps = torch.arange(0, d, 2, dtype=torch.float32, device=self.inv_freq.device) / d
            return base ** (-exps), 1.0, 1.0
        wavelength = 2 * math.pi / (self.inv_freq * self._position_unit())  # (d/2,) in frames
        ramp = (sc.train_frames / wavelength - sc.yarn_alpha) / (sc.yarn_beta - sc.yarn_alpha)
        keep = ramp.clamp(0.0, 1.0)  # γ_k: 1 keeps θ_k, 0 interpolates it by s
        return (1 - keep) * self.inv_freq / s + keep * self.inv_freq, 1.0, (0.1 * math.log(s) + 1.0) ** 2

    def angles(self, pos: torch.Tensor, inv_freq: torch.Tensor | None = None, pos_factor: float = 1.0) -> torch.Tensor:
        """(T,) or (B, T) positions -> (..., d/2) angles p·θ_k in fp32 (θ, and a factor on p, as given)."""
        p = pos.to(torch.float32) * (self._position_unit() * pos_factor)
        freq = self.inv_freq if inv_freq is None else inv_freq
        return p[..., None] * freq.to(p.device)  # (..., T, d/2)

    def rotate(self, x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor | None = None,
               pos_factor: float = 1.0) -> torch.Tensor:
        """x (B, H, T, d) rotated by the angles of ``pos`` (T,) or (B, T); computed in fp32."""
        ang = self.angles(pos, inv_freq, pos_factor)  # (T, d/2) or (B, T, d/2)
        if ang.dim() == 3:
            ang = ang[:, None]  # (B, 1, T, d/2): per-utterance positions, shared by the heads
        if self.interleaved:
            cos = ang.cos().repeat_interleave(2, dim=-1)  # (T, d): c0 c0 c1 c1 …
            sin = ang.sin().repeat_interleave(2, dim=-1)
            xf = x.float()
            x_even, x_odd = xf[..., 0::2], xf[..., 1::2]  # (B, H, T, d/2)
            rot = torch.stack((-x_odd, x_even), dim=-1).flatten(-2)  # (B, H, T, d)
        else:
            cos = torch.cat((ang.cos(), ang.cos()), dim=-1)  # (T, d): c0 … c_{d/2−1} c0 …
            sin = torch.cat((ang.sin(), ang.sin()), dim=-1)
            xf = x.float()
            rot = rotate_half(xf)
        return (xf * cos + rot * sin).to(x.dtype)

    def transform_qk(self, q, k, q_pos, k_pos):
        freq, pos_factor, logit_factor = self.scaled_frequencies(k_pos.numel())
        if self.drawn_positions is not None:  # a position map: frame t of utterance b sits at drawn[b, t]
            q_pos, k_pos = self.drawn_positions[:, q_pos], self.drawn_positions[:, k_pos]  # (B, Tq), (B, Tk)
        q = self.rotate(q, q_pos, freq, pos_factor)
        if logit_factor != 1.0:
            q = q * logit_factor  # YaRN's temperature, on q alone: the same logits
        return q, self.rotate(k, k_pos, freq, pos_factor)

    def extra_repr(self) -> str:
        return (
            f"d_head={self.d_head}, base={self.base:g}, interleaved={self.interleaved}, "
            f"time_scale={self.time_scale}" + ("" if self.scaling is None else f", scaling={self.scaling}")
            + ("" if self.position_map is None else f", position_map={self.position_map}")
        )
