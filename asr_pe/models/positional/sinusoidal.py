"""Sinusoidal absolute PE (Vaswani et al., 2017, "Attention Is All You Need").

PE[p, 2k] = sin(p·ω_k), PE[p, 2k+1] = cos(p·ω_k), ω_k = 10000^(−2k/D);  X ← X·α + PE.

α = 1 follows the CAPE authors' code (default); α = √D is ESPnet's convention and makes the
content term dominate the position term. The table is computed from the positions of each
call, so there is no length limit.
"""

from __future__ import annotations

import math

import torch

from .base import InputPE, register_input_pe
from .position_maps import build_position_map


def sinusoid(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Interleaved sin/cos embedding of (possibly fractional) positions: (...,) -> (..., dim)."""
    assert dim % 2 == 0, f"sinusoidal PE needs an even width, got {dim}"
    k = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    omega = torch.exp(-math.log(base) * k / dim)  # (dim/2,)
    angles = positions.float().unsqueeze(-1) * omega  # (..., dim/2)
    # interleave: (..., dim/2, 2) -> (..., dim)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)


def resolve_xscale(xscale: float | str, d_model: int) -> float:
    if xscale == "sqrt_d":
        return math.sqrt(d_model)
    try:
        return float(xscale)
    except (TypeError, ValueError):
        raise ValueError(f"xscale must be a number or 'sqrt_d', got {xscale!r}") from None


@register_input_pe("sinusoidal")
class SinusoidalPE(InputPE):
    def __init__(self, d_model: int, xscale: float | str = 1.0, base: float = 10000.0,
                 position_map: dict | None = None, frame_shift_s: float = 0.04):
        super().__init__()
        self.d_model = d_model
        self.xscale = resolve_xscale(xscale, d_model)
        self.base = base
        # a training-time remedy for long inputs (position_maps.py); None: positions 0 … T−1
        self.position_map = build_position_map(position_map, frame_shift_s)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        drawn = None if self.position_map is None else self.position_map.draw(lengths, x.size(1), self.training)
        if drawn is not None:
            pe = sinusoid(drawn.to(x.device), self.d_model, self.base).to(x.dtype)  # (B, T, D)
            return x * self.xscale + pe
        pos = torch.arange(x.size(1), device=x.device)  # (T,)
        pe = sinusoid(pos, self.d_model, self.base).to(x.dtype)  # (T, D)
        return x * self.xscale + pe.unsqueeze(0)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, xscale={self.xscale:g}, position_map={self.position_map}"
