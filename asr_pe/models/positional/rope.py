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
"""

from __future__ import annotations

import torch

from .base import AttentionPE, register_attention_pe


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(…, d) -> (…, d): [x1, x2] -> [−x2, x1] with x1, x2 the two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@register_attention_pe("rope")
class RoPE(AttentionPE):
    fused_ok = True

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        frame_shift_s: float = 0.04,
        base: float = 10000.0,
        interleaved: bool = False,
        time_scale: float | None = None,
        causal: bool = False,
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

    def angles(self, pos: torch.Tensor) -> torch.Tensor:
        """(T,) positions -> (T, d/2) angles p·θ_k in fp32."""
        p = pos.to(torch.float32)
        if self.time_scale is not None:
            p = p * (self.frame_shift_s * self.time_scale)
        return p[:, None] * self.inv_freq.to(p.device)[None, :]

    def rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x (B, H, T, d) rotated by the angles of ``pos`` (T,); computed in fp32."""
        ang = self.angles(pos)  # (T, d/2)
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
        return self.rotate(q, q_pos), self.rotate(k, k_pos)

    def extra_repr(self) -> str:
        return (
            f"d_head={self.d_head}, base={self.base:g}, interleaved={self.interleaved}, "
            f"time_scale={self.time_scale}"
        )
