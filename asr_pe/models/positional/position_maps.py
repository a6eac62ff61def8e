"""Position maps: training-time remedies for length generalisation, one switch per PE.

A PE normally sees frame t at position t. A position map replaces the positions 0 … n−1 of
each utterance (n its valid frames) by other ones, drawn once per forward pass and shared by
every layer (``PositionalEncoding.forward_input`` draws them for the attention hooks):

* ``scale`` (CAPE's global scaling carried to any PE): p_t = λ·t with log λ ~ U[ln lo, ln hi]
  per utterance, in training only. With hi·L_tr >= the longest test input the model sees
  position distances as long as the test's while training on short inputs; evaluation uses
  p_t = t.
* ``randomized`` (Ruoss et al., ACL 2023, "Randomized positional encodings boost length
  generalization of Transformers"): the positions are a sorted random subset of n distinct
  integers of [0, max_frames), max_frames >= the longest test input. The paper samples at
  test time too; here an evaluation sample is drawn from a generator seeded by n, so a
  decoding is deterministic. An input longer than max_frames falls back to p_t = t.

Config (``pe.attention.position_map`` for RoPE / relative, ``pe.input.position_map`` for
sinusoidal): ``{kind: scale, range: [1, 32]}`` or ``{kind: randomized, max_seconds: 200}``.
Padded frames get positions past the utterance's last (masked everywhere; finite).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch

KINDS = ("scale", "randomized")


@dataclass(frozen=True)
class PositionMap:
    kind: str
    scale_range: tuple[float, float] = (1.0, 1.0)
    max_frames: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"position_map.kind must be one of {KINDS}, got {self.kind!r}")
        lo, hi = self.scale_range
        if self.kind == "scale" and not 0 < lo <= hi:
            raise ValueError(f"position_map scale range must be 0 < lo <= hi, got {list(self.scale_range)}")
        if self.kind == "randomized" and self.max_frames < 1:
            raise ValueError(f"position_map randomized needs max_seconds > 0, got {self.max_frames} frames")

    def draw(self, lengths: torch.Tensor, T: int, training: bool,
             generator: torch.Generator | None = None) -> torch.Tensor | None:
        """Positions (B, T) float32 for utterances of ``lengths`` padded to T, or None where the
        plain positions 0 … T−1 apply (``scale`` at evaluation)."""
        if self.kind == "scale":
            if not training:
                return None
            lo, hi = (math.log(v) for v in self.scale_range)
            u = torch.rand(lengths.size(0), 1, generator=generator)
            lam = torch.exp(lo + (hi - lo) * u).to(lengths.device)  # (B, 1)
            return lam * torch.arange(T, device=lengths.device, dtype=torch.float32)[None, :]  # (B, T)
        rows = []
        for n in lengths.tolist():
            n = int(n)
            if n > self.max_frames:
                pos = torch.arange(n, dtype=torch.float32)  # longer than the range: plain positions
            else:
                g = generator if training else torch.Generator().manual_seed(n)
                pos = torch.randperm(self.max_frames, generator=g)[:n].sort().values.float()  # (n,)
            last = pos[-1] if n else torch.tensor(-1.0)
            pad = last + 1 + torch.arange(T - n, dtype=torch.float32)  # past the last: masked anyway
            rows.append(torch.cat((pos, pad)))
        return torch.stack(rows).to(lengths.device)  # (B, T)


def build_position_map(spec: Mapping[str, Any] | None, frame_shift_s: float) -> PositionMap | None:
    """``{kind: scale, range: [lo, hi]}`` | ``{kind: randomized, max_seconds: S}`` | None."""
    if spec is None:
        return None
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind in (None, "none"):
        return None
    if kind == "scale":
        rng = spec.pop("range", None)
        if rng is None or len(rng) != 2:
            raise ValueError(f"position_map scale needs range: [lo, hi], got {rng!r}")
        pm = PositionMap("scale", scale_range=(float(rng[0]), float(rng[1])))
    elif kind == "randomized":
        seconds = spec.pop("max_seconds", None)
        if seconds is None:
            raise ValueError("position_map randomized needs max_seconds (>= the longest test input)")
        pm = PositionMap("randomized", max_frames=round(float(seconds) / frame_shift_s))
    else:
        raise ValueError(f"position_map.kind must be one of {KINDS}, got {kind!r}")
    if spec:
        raise ValueError(f"position_map {kind}: unknown keys {sorted(spec)}")
    return pm
