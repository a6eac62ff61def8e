"""Learned absolute position table (as in BERT; CAPE's "abs.pos." baseline in flashlight).

X ← X·α + E[p],  E ∈ R^(max_len × D) learned, p = 0 … T−1 the frame index.

The table has a real length limit. Past ``max_len`` the behaviour is an explicit policy:

* ``error`` (default): raise, naming the input length, the limit and how to change them;
* ``clamp``: every position ≥ max_len uses the last row E[max_len − 1];
* ``wrap``: a position p ≥ max_len uses E[p mod (max_len − 1)], the rule of CAPE's
  flashlight baseline (Likhomanenko et al. 2021); positions inside the table are unchanged.

Only valid frames count towards the limit: a padded batch whose longest utterance fits
never raises. Init U(−0.1, 0.1) follows flashlight's ``PositionEmbedding``.
"""

from __future__ import annotations

import torch
from torch import nn

from asr_pe.errors import UserError
from .base import InputPE, register_input_pe
from .sinusoidal import resolve_xscale

POLICIES = ("error", "clamp", "wrap")


class PositionLimitError(UserError, ValueError):
    """An input is longer than a learned table and the policy is ``error``."""


@register_input_pe("learned")
class LearnedPE(InputPE):
    def __init__(
        self,
        d_model: int,
        max_len: int = 2048,
        policy: str = "error",
        xscale: float | str = 1.0,
        init_range: float = 0.1,
    ):
        super().__init__()
        if policy not in POLICIES:
            raise ValueError(f"learned PE: policy must be one of {POLICIES}, got {policy!r}")
        if int(max_len) < 2:
            raise ValueError(f"learned PE: max_len must be >= 2, got {max_len!r}")
        self.d_model, self.max_len, self.policy = d_model, int(max_len), policy
        self.xscale = resolve_xscale(xscale, d_model)
        self.table = nn.Parameter(torch.empty(self.max_len, d_model).uniform_(-init_range, init_range))

    def positions(self, T: int, lengths: torch.Tensor | None = None, device=None) -> torch.Tensor:
        """Table rows used for frames 0 … T−1 under the policy: (T,) int64."""
        pos = torch.arange(T, device=device)
        longest = T if lengths is None or lengths.numel() == 0 else int(lengths.max())
        if longest > self.max_len and self.policy == "error":
            raise PositionLimitError(
                f"learned PE: input has {longest} frames but the position table holds max_len="
                f"{self.max_len}; raise pe.input.max_len to at least {longest} (before training) "
                f"or set pe.input.policy=clamp|wrap to run past the table"
            )
        if self.policy == "wrap":
            pos = torch.where(pos < self.max_len, pos, pos % (self.max_len - 1))
        # clamp policy, and padded frames past the table under `error` (their value is unused)
        return pos.clamp(max=self.max_len - 1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        pos = self.positions(x.size(1), lengths, x.device)  # (T,)
        return x * self.xscale + self.table[pos].to(x.dtype).unsqueeze(0)  # (1, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, policy={self.policy!r}, xscale={self.xscale:g}"
