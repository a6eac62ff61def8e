"""T5 relative position bias (Raffel et al., JMLR 2020, arXiv 1910.10683; Mesh-TF/HF buckets).

    S_h[i, j] += E[bucket(j − i), h],   E ∈ R^(num_buckets × H)

added after the 1/√d scaling. ONE table E is shared by all layers of a stack
(``build_layers``): every layer's hook holds the same ``nn.Parameter``, counted once by
``parameters()``.

Buckets (r = j − i, num_buckets = 32, max_distance = 128 by default):

* bidirectional (encoder): half the buckets per sign, +16 for r > 0; with n = |r|,
  n < 8 → n, else min(15, 8 + ⌊ln(n/8)/ln(128/8)·8⌋).
  r = 0→0, −7→7, −8→8, −64→14, ≤−100→15, 1→17, 8→24, 64→30, ≥100→31.
* unidirectional (``causal=True``, T5's decoder): n = max(−r, 0) = max(i − j, 0), all 32
  buckets for the past: n < 16 → n, else min(31, 16 + ⌊ln(n/16)/ln(128/16)·16⌋); future
  keys share bucket 0 and are hidden by the causal mask.

Distances ≥ max_distance share the last bucket, so any length works. Buckets are computed
from the positions of each call (nothing T×T is cached): for position ranges (what
``MultiHeadAttention`` passes) only the Tq + Tk − 1 distinct offsets are bucketed and looked
up, and the (H, Tq, Tk) bias is laid out from them with one copy (``toeplitz``); so the
table's gradient is a sum over Tq + Tk − 1 offsets, not a scatter over Tq·Tk entries.
Init E ~ N(0, init_std²), init_std = d_model^(−1/2) by default (HF T5's init).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from .base import AttentionPE, ToeplitzBias, descending_offsets, register_attention_pe, toeplitz


def t5_bucket(
    rel: torch.Tensor, *, causal: bool = False, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """Bucket ids (int64, same shape) of relative offsets ``rel`` = j − i (key minus query)."""
    rel = rel.to(torch.long)
    out = torch.zeros_like(rel)
    if causal:
        n = (-rel).clamp(min=0)
    else:
        num_buckets //= 2
        out = out + (rel > 0).to(torch.long) * num_buckets
        n = rel.abs()
    max_exact = num_buckets // 2
    large = max_exact + (
        torch.log(n.float().clamp(min=1.0) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)  # truncation = floor: the argument is >= 0 wherever it is used
    large = large.clamp(max=num_buckets - 1)
    return out + torch.where(n < max_exact, n, large)


@register_attention_pe("t5")
class T5RelativeBias(AttentionPE):
    fused_ok = True

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        causal: bool = False,
        init_std: float | None = None,
    ):
        super().__init__()
        min_buckets = 2 if causal else 4
        if num_buckets < min_buckets or num_buckets % 2:
            raise ValueError(f"t5: num_buckets must be even and >= {min_buckets}, got {num_buckets}")
        exact = num_buckets // 2 if causal else num_buckets // 4
        if max_distance <= exact:
            raise ValueError(f"t5: max_distance ({max_distance}) must exceed the exact range ({exact})")
        self.n_heads, self.num_buckets, self.max_distance = n_heads, num_buckets, max_distance
        self.causal = bool(causal)
        std = d_model ** -0.5 if init_std is None else float(init_std)
        self.table = nn.Parameter(torch.randn(num_buckets, n_heads) * std)  # (num_buckets, H)

    @classmethod
    def build_layers(cls, n_layers: int, **kwargs: Any) -> nn.ModuleList:
        """All layers reference the first layer's table: one parameter for the stack."""
        layers = [cls(**kwargs) for _ in range(n_layers)]
        for layer in layers[1:]:
            layer.table = layers[0].table
        return nn.ModuleList(layers)

    def buckets(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(Tq,), (Tk,) positions -> (Tq, Tk) bucket ids of j − i."""
        rel = k_pos[None, :] - q_pos[:, None]  # (Tq, Tk) j − i
        return t5_bucket(rel, causal=self.causal, num_buckets=self.num_buckets, max_distance=self.max_distance)

    def _per_offset(self, q, q_pos, k_pos):
        """(H, Tq + Tk − 1) bias per ``descending_offsets`` entry, or None for positions that are
        not ranges."""
        offsets = descending_offsets(q_pos, k_pos)  # (Tq + Tk − 1,) i − j, or None
        if offsets is None:
            return None
        b = t5_bucket(-offsets, causal=self.causal, num_buckets=self.num_buckets, max_distance=self.max_distance)
        return self.table[b].t().to(q.dtype)  # (H, Tq + Tk − 1)

    def logits_bias(self, q, q_pos, k_pos):
        q_pos, k_pos = q_pos.to(self.table.device), k_pos.to(self.table.device)
        per_offset = self._per_offset(q, q_pos, k_pos)
        if per_offset is None:  # arbitrary positions: bucket every entry
            bias = self.table[self.buckets(q_pos, k_pos)]  # (Tq, Tk, H)
            return bias.permute(2, 0, 1).unsqueeze(0).to(q.dtype)  # (1, H, Tq, Tk)
        return toeplitz(per_offset, q_pos.numel(), k_pos.numel()).unsqueeze(0)  # (1, H, Tq, Tk)

    def block_bias(self, q, q_pos, k_pos):
        """The table's value per offset (``ToeplitzBias``): its gradient is summed per offset
        block by block, then per bucket by the lookup's backward (2T − 1 entries)."""
        q_pos, k_pos = q_pos.to(self.table.device), k_pos.to(self.table.device)
        per_offset = self._per_offset(q, q_pos, k_pos)
        return None if per_offset is None else ToeplitzBias(per_offset, q_pos.numel(), k_pos.numel())

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, causal={self.causal}"
        )
