"""ALiBi: attention with linear biases (Press et al., ICLR 2022, arXiv 2108.12409).

Encoder (default, symmetric) form, as used for non-causal speech encoders (data2vec 2.0):

    S_h[i, j] += −m_h·|i − j|

Causal form (``causal=True``, decoders): −m_h·(i − j) for j ≤ i, the paper's form; the
entries j > i get 0 here and must be hidden by the causal mask, which the attention
module applies for a causal layer.

Slopes: for H a power of two m_h = 2^(−8h/H), h = 1 … H (H = 8: 1/2 … 1/256); otherwise
the c = 2^⌊log₂H⌋ slopes of that series followed by every other slope of the series for
2c (the authors' ``get_slopes``). ``learned_scale`` adds a per-head factor s_h ≥ 0 (init 1,
clamped at 0), m_h ← s_h·m_h, one per layer.

Symmetric ALiBi cannot tell left from right: |i − j| is the same for a key before and
after the query, so word order must come from elsewhere; keep the convolutional front
end (and the Conformer conv module) when using it. The bias is computed from the
positions of each call: no table, no length cap.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import AttentionPE, ToeplitzBias, descending_offsets, register_attention_pe, toeplitz


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Per-head slopes m_h, (H,) fp32, following Press et al.'s reference ``get_slopes``."""
    if n_heads < 1:
        raise ValueError(f"alibi: n_heads must be >= 1, got {n_heads}")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    c = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = power_of_two(c)
    if c < n_heads:
        slopes += power_of_two(2 * c)[0::2][: n_heads - c]
    return torch.tensor(slopes, dtype=torch.float32)


@register_attention_pe("alibi")
class ALiBi(AttentionPE):
    fused_ok = True

    def __init__(self, n_heads: int, causal: bool = False, learned_scale: bool = False):
        super().__init__()
        self.n_heads, self.causal = n_heads, bool(causal)
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)  # (H,)
        self.scale = nn.Parameter(torch.ones(n_heads)) if learned_scale else None

    def head_slopes(self) -> torch.Tensor:
        """The effective slopes (H,) (with the learned scale, clamped at 0)."""
        if self.scale is None:
            return self.slopes
        return self.slopes * self.scale.clamp(min=0.0)

    def logits_bias(self, q, q_pos, k_pos):
        m = self.head_slopes().to(q.device)  # (H,)
        offsets = descending_offsets(q_pos, k_pos)  # (Tq + Tk − 1,) i − j, or None
        if offsets is None:  # arbitrary positions: every entry
            rel = (q_pos[:, None] - k_pos[None, :]).to(torch.float32)  # (Tq, Tk) i − j
            dist = rel.clamp(min=0.0) if self.causal else rel.abs()
            return (-m[:, None, None] * dist[None]).to(q.dtype).unsqueeze(0)  # (1, H, Tq, Tk)
        return toeplitz(self._per_offset(m, offsets, q.dtype), q_pos.numel(), k_pos.numel()).unsqueeze(0)  # (1, H, Tq, Tk)

    def _per_offset(self, m, offsets, dtype):
        rel = offsets.to(torch.float32)
        dist = rel.clamp(min=0.0) if self.causal else rel.abs()
        return (-m[:, None] * dist[None]).to(dtype)  # (H, Tq + Tk − 1)

    def block_bias(self, q, q_pos, k_pos):
        """Per offset (``ToeplitzBias``); used in training only when the scale is learned."""
        offsets = descending_offsets(q_pos, k_pos)
        if offsets is None:
            return None
        per_offset = self._per_offset(self.head_slopes().to(q.device), offsets, q.dtype)
        return ToeplitzBias(per_offset, q_pos.numel(), k_pos.numel())

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, causal={self.causal}, learned_scale={self.scale is not None}"
