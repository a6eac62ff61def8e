"""CAPE: continuous augmented positional embeddings (Likhomanenko et al., NeurIPS 2021,
arXiv 2106.03143), audio variant.

Positions are times in seconds, p_t = t·Δt (Δt = ``frame_shift_s``), centred per utterance
by their mean over the *valid* frames, so padding never moves them. In training only:

    δ ~ U[−δ_max, δ_max]             per utterance   (global shift, seconds)
    ε_t ~ U[−ε_max, ε_max]·Δt        per frame       (local shift; ε_max in frames)
    log λ ~ U[−ln λ_max, ln λ_max]   per utterance   (global scaling)
    p′ = λ·(p + δ + ε)

X ← X·α + sinusoid(p′·f), f = ``freq_scale`` (30: one embedding unit is 1/30 s), the
interleaved sin/cos of ``sinusoidal.sinusoid``. α = ``xscale``: 1 by default (as our
sinusoidal PE; the authors' ESPnet port scales by √D, available as ``xscale: sqrt_d``).

Defaults follow the authors' audio recipe: δ_max = 30 s (flashlight draws U[−G/2, G/2],
G = 60 s), ε_max = 0.5 frame, λ_max = 1.1. Set ``max_global_shift``/``max_local_shift`` to
0 or None, or ``max_global_scaling`` to 1 or None, to switch an augmentation off.
Evaluation is deterministic: centring only. Positions are computed per call: no length cap.
"""

from __future__ import annotations

import math

import torch

from .base import InputPE, register_input_pe
from .sinusoidal import resolve_xscale, sinusoid


@register_input_pe("cape")
class CAPE(InputPE):
    def __init__(
        self,
        d_model: int,
        frame_shift_s: float = 0.04,
        max_global_shift: float | None = 30.0,
        max_local_shift: float | None = 0.5,
        max_global_scaling: float | None = 1.1,
        freq_scale: float = 30.0,
        xscale: float | str = 1.0,
        base: float = 10000.0,
    ):
        super().__init__()
        if not frame_shift_s > 0:
            raise ValueError(f"cape: frame_shift_s must be > 0, got {frame_shift_s}")
        self.max_global_shift = float(max_global_shift or 0.0)
        self.max_local_shift = float(max_local_shift or 0.0)
        self.max_global_scaling = float(max_global_scaling or 1.0)
        if self.max_global_shift < 0 or self.max_local_shift < 0:
            raise ValueError("cape: max_global_shift and max_local_shift must be >= 0")
        if self.max_global_scaling < 1:
            raise ValueError(f"cape: max_global_scaling must be >= 1 (a ratio), got {max_global_scaling}")
        self.d_model = d_model
        self.frame_shift_s = float(frame_shift_s)
        self.freq_scale = float(freq_scale)
        self.xscale = resolve_xscale(xscale, d_model)
        self.base = base

    def positions(
        self, lengths: torch.Tensor, T: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Positions in seconds (B, T): centred over valid frames, augmented in training.

        Padded frames get 0. Random draws happen in the order δ, λ, ε (δ and λ per
        utterance first), so a fixed seed gives the same δ and λ whatever T is."""
        device = lengths.device
        B = lengths.size(0)
        t = torch.arange(T, device=device, dtype=torch.float32)  # (T,)
        valid = t[None, :] < lengths[:, None]  # (B, T)
        n = lengths.clamp(min=1).to(torch.float32)[:, None]  # (B, 1)
        # mean of t·Δt over t = 0 … n−1 is (n−1)/2·Δt
        pos = (t[None, :] - (n - 1) / 2) * self.frame_shift_s  # (B, T)
        if self.training:
            def uniform(shape, bound):
                u = torch.rand(shape, device=device, generator=generator)
                return (2 * u - 1) * bound

            if self.max_global_shift > 0:
                pos = pos + uniform((B, 1), self.max_global_shift)
            if self.max_global_scaling > 1:
                log_lambda = uniform((B, 1), math.log(self.max_global_scaling))
            else:
                log_lambda = None
            if self.max_local_shift > 0:
                pos = pos + uniform((B, T), self.max_local_shift * self.frame_shift_s)
            if log_lambda is not None:
                pos = pos * log_lambda.exp()
        return pos.masked_fill(~valid, 0.0)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        pos = self.positions(lengths.to(x.device), x.size(1))  # (B, T) seconds
        pe = sinusoid(pos * self.freq_scale, self.d_model, self.base).to(x.dtype)  # (B, T, D)
        return x * self.xscale + pe

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, frame_shift_s={self.frame_shift_s:g}, "
            f"max_global_shift={self.max_global_shift:g}, max_local_shift={self.max_local_shift:g}, "
            f"max_global_scaling={self.max_global_scaling:g}, freq_scale={self.freq_scale:g}, "
            f"xscale={self.xscale:g}"
        )
