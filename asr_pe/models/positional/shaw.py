"""Learned relative position representations (Shaw, Uszkoreit & Vaswani, NAACL 2018,
"Self-Attention with Relative Position Representations").

    e_ij = q_i·(k_j + a^K_{c(j−i)}) / √d,      z_i = Σ_j α_ij (v_j + a^V_{c(j−i)}),
    c(x) = clip(x, −k, k) + k,

with tables a^K, a^V of shape (2k+1, d) shared across heads, one pair per layer.

Efficient form (the paper's §3.3): R = Q·(a^K)ᵀ is (B, H, Tq, 2k+1); the bias
q_i·a^K_{c(j−i)}/√d is R gathered at c(j−i), so no (Tq, Tk, d) tensor is ever built. The
value term is computed the same way in reverse: the weights α_ij are summed per bucket
c(j−i) (scatter-add, (B, H, Tq, 2k+1)) and multiplied by a^V.

Beyond the window (|j − i| > k) the behaviour is an option:

* ``clip`` (default, Shaw et al.): every distance beyond k shares the edge row a_{±k};
* ``zero``: distances beyond k contribute nothing — the "relpos" baseline of CAPE
  (Likhomanenko et al. 2021), whose learned key-side table is only defined inside the window.

Default k = 64 frames (2.56 s at 40 ms frames): Shaw et al. used k = 16 *words*; at speech
frame rates a word spans several frames, so a wider window keeps the same reach in time.
Any input length works: every distance maps to one of the 2k + 1 rows (or to nothing), so
the table never limits T.
The default is key-only (``value_term=False``): the PE is then a pure logit bias and goes
through the bias path of ``MultiHeadAttention``; the value term needs the attention weights
and so switches the layer to the explicit path (``fused_ok = False``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import AttentionPE, register_attention_pe

BEYOND = ("clip", "zero")


def shaw_buckets(q_pos: torch.Tensor, k_pos: torch.Tensor, max_distance: int, beyond: str) -> torch.Tensor:
    """Table row c(j − i) for every (query i, key j): (Tq, Tk) int64 in [0, 2k] — or 2k+1, a
    zero row, for distances beyond the window under ``beyond="zero"``."""
    rel = k_pos[None, :] - q_pos[:, None]  # (Tq, Tk) j − i
    idx = rel.clamp(-max_distance, max_distance) + max_distance
    if beyond == "zero":
        idx = torch.where(rel.abs() > max_distance, torch.full_like(idx, 2 * max_distance + 1), idx)
    return idx


@register_attention_pe("shaw")
class ShawPE(AttentionPE):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        max_distance: int = 64,
        beyond: str = "clip",
        value_term: bool = False,
        causal: bool = False,
    ):
        super().__init__()
        if beyond not in BEYOND:
            raise ValueError(f"shaw PE: beyond must be one of {BEYOND}, got {beyond!r}")
        if int(max_distance) < 1:
            raise ValueError(f"shaw PE: max_distance must be >= 1, got {max_distance!r}")
        assert d_model % n_heads == 0, f"d_model {d_model} not divisible by n_heads {n_heads}"
        self.d_head = d_model // n_heads
        self.max_distance = int(max_distance)
        self.beyond = beyond
        self.use_value_term = bool(value_term)
        # A causal mask only hides j > i; the table works unchanged (rows k+1…2k go unused).
        self.causal = causal
        n_rows = 2 * self.max_distance + 1
        # Glorot-uniform init, the tensor2tensor default for these variables.
        self.key_table = nn.Parameter(nn.init.xavier_uniform_(torch.empty(n_rows, self.d_head)))
        if self.use_value_term:
            self.value_table = nn.Parameter(nn.init.xavier_uniform_(torch.empty(n_rows, self.d_head)))
        else:
            self.register_parameter("value_table", None)
        self.fused_ok = not self.use_value_term

    def _buckets(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        return shaw_buckets(q_pos, k_pos, self.max_distance, self.beyond)

    def logits_bias(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """q_i·a^K_{c(j−i)}/√d: (B, H, Tq, Tk)."""
        B, H, Tq, d = q.shape
        table = self.key_table.to(q.dtype)
        r = torch.matmul(q, table.t())  # (B, H, Tq, 2k+1)
        if self.beyond == "zero":
            r = nn.functional.pad(r, (0, 1))  # (B, H, Tq, 2k+2): last column is the zero row
        idx = self._buckets(q_pos, k_pos)  # (Tq, Tk)
        bias = torch.gather(r, -1, idx.expand(B, H, Tq, idx.size(1)))  # (B, H, Tq, Tk)
        return bias / math.sqrt(d)

    def value_term(
        self, weights: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """Σ_j α_ij a^V_{c(j−i)}: weights summed per bucket, then one (2k+1, d) matmul."""
        if not self.use_value_term:
            return None
        B, H, Tq, Tk = weights.shape
        n_rows = 2 * self.max_distance + 1
        idx = self._buckets(q_pos, k_pos).expand(B, H, Tq, Tk)  # (B, H, Tq, Tk)
        per_bucket = weights.new_zeros(B, H, Tq, n_rows + (self.beyond == "zero"))
        per_bucket.scatter_add_(-1, idx, weights)  # (B, H, Tq, 2k+1[+1])
        per_bucket = per_bucket[..., :n_rows]  # the zero row (beyond the window) adds nothing
        return torch.matmul(per_bucket, self.value_table.to(weights.dtype))  # (B, H, Tq, d)

    def extra_repr(self) -> str:
        return f"max_distance={self.max_distance}, beyond={self.beyond!r}, value_term={self.use_value_term}"
