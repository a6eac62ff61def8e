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

from .base import AttentionPE, BlockBias, descending_offsets, offset_rows, register_attention_pe
from .relative import rel_shift

BEYOND = ("clip", "zero")
ROW_LAYOUT_MAX_KEYS_GRAD = 768


def row_layout_wins(requires_grad: bool, n_keys: int, device_type: str) -> bool:
    """Whether the bias is laid out by rows (``ShawPE._bias_for_ranges``) rather than gathered.

    On CPU the row layout is faster, except for the backward at >= 768 keys, where the generic
    strided-view gradient loses to the gather's (measured, B = 8, H = 4: T = 250 0.93x,
    T = 1000 1.12x the gather's time for a layer's fwd+bwd). On a GPU always the row layout: the
    gather's backward scatter-adds each row's Tk gradients into 2k+1 slots, and the atomics on
    the two clipped edge slots, which take almost all of them, serialise (H100, bf16 autocast,
    B = 8, T = 4000: a Shaw training step 1331 ms, 21x ``none``; docs/benchmarks.md)."""
    return device_type != "cpu" or not (requires_grad and n_keys >= ROW_LAYOUT_MAX_KEYS_GRAD)


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
        r = torch.matmul(q * (1.0 / math.sqrt(d)), table.t())  # (B, H, Tq, 2k+1), scaled on the narrow side
        offsets = descending_offsets(q_pos, k_pos)
        if offsets is not None and row_layout_wins(r.requires_grad, k_pos.numel(), r.device.type):
            return self._bias_for_ranges(r, int(offsets[0]), k_pos.numel())
        if self.beyond == "zero":
            r = nn.functional.pad(r, (0, 1))  # (B, H, Tq, 2k+2): last column is the zero row
        idx = self._buckets(q_pos, k_pos)  # (Tq, Tk)
        return torch.gather(r, -1, idx.expand(B, H, Tq, idx.size(1)))  # (B, H, Tq, Tk)

    def block_bias(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> "ShawBlockBias | None":
        """The (B, H, Tq, 2k+1) products r = q·a^K/√d (``ShawBlockBias``): each block's bias is
        laid out by rows from r, and its gradient summed back per table column, so neither the
        (B, H, Tq, Tk) bias nor the gather's scatter-add over it exists."""
        if descending_offsets(q_pos, k_pos) is None:
            return None
        # the scale on the (2k+1, d) table, not on q, its transpose made contiguous (the GEMM 26 ms
        # instead of 43-53), and the table padded to a multiple of 16 rows: the GEMM into 129 columns
        # ran at half the speed of one into 144 (13.7-14.5 against 6.6 ms; B = 8, H = 4, T = 1000,
        # d = 36, 1 thread); r is the view of its first 2k+1 columns. On CPU only: FlexAttention on
        # CUDA reads r in its compiled kernels, which the GPU checks ran on a dense r
        n_rows = self.key_table.size(0)
        pad_rows = -n_rows % 16 if q.device.type == "cpu" else 0
        table = nn.functional.pad(self.key_table.to(q.dtype) * (1.0 / math.sqrt(q.size(-1))), (0, 0, 0, pad_rows))
        r = torch.matmul(q, table.t().contiguous())[..., :n_rows]  # (B, H, Tq, 2k+1) of (B, H, Tq, ⌈2k+1⌉₁₆)
        return ShawBlockBias(self, r, q_pos, k_pos)

    def _row_spans(self, top: int, width: int) -> tuple[int, int, int, int]:
        """For rows of ``width`` descending offsets whose first column is j − i = −top: how many
        columns repeat the left edge, the window's table columns [lo, hi] (hi < lo: none) and how
        many repeat the right edge."""
        k = self.max_distance
        lo, hi = -top, width - 1 - top  # j − i at the first and last column
        n_left, n_right = min(width, max(0, -k - lo)), min(width, max(0, hi - k))
        return n_left, max(lo, -k) + k, min(hi, k) + k, n_right

    def _bias_for_ranges(self, r: torch.Tensor, top: int, n_keys: int) -> torch.Tensor:
        """Bias for a query range against a key range without a (Tq, Tk) index tensor.

        Each row holds the same sequence of table columns along the Tq + Tk − 1 offsets
        (``descending_offsets``: column c is j − i = c − top): the edge column repeated below
        −k, the window, the other edge repeated above k (zeros for ``beyond="zero"``). That
        row layout is built once per row from r (a copy of width Tq + Tk − 1, whose gradient
        is a sum over the repeats, not a scatter) and ``rel_shift`` views it as (Tq, Tk)."""
        Tq = r.size(-2)
        W = Tq + n_keys - 1
        n_left, c_lo, c_hi, n_right = self._row_spans(top, W)
        edge_l, edge_r = (r[..., :1], r[..., -1:]) if self.beyond == "clip" else (r[..., :1] * 0, r[..., :1] * 0)
        parts = []
        if n_left:
            parts.append(edge_l.expand(*r.shape[:-1], n_left))
        if c_hi >= c_lo:
            parts.append(r[..., c_lo: c_hi + 1])
        if n_right:
            parts.append(edge_r.expand(*r.shape[:-1], n_right))
        rows = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0].contiguous()  # (B, H, Tq, W)
        return rel_shift(rows, n_keys)  # (B, H, Tq, Tk)

    def value_term(
        self, weights: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """Σ_j α_ij a^V_{c(j−i)}: weights summed per bucket, then one (2k+1, d) matmul."""
        if not self.use_value_term:
            return None
        B, H, Tq, Tk = weights.shape
        n_rows = 2 * self.max_distance + 1
        idx = self._buckets(q_pos, k_pos).expand(B, H, Tq, Tk)  # (B, H, Tq, Tk)
        # summed in fp32 whatever the weights' dtype: a clipped bucket collects thousands of
        # weights of ~1/T, which a bf16 sum rounds away (one by one, 4000 of 1/4000 stall at 0.125,
        # as CUDA's bf16 scatter-add atomics add them), and those atomics into 2k+1 slots per row
        # serialise (an H100 bf16 Shaw step took 1.4 s at T = 4000, fp32 0.24 s; docs/benchmarks.md)
        per_bucket = torch.zeros(B, H, Tq, n_rows + (self.beyond == "zero"), dtype=torch.float32,
                                 device=weights.device)
        per_bucket.scatter_add_(-1, idx, weights.float())  # (B, H, Tq, 2k+1[+1])
        per_bucket = per_bucket[..., :n_rows].to(weights.dtype)  # the zero row (beyond the window) adds nothing
        return torch.matmul(per_bucket, self.value_table.to(weights.dtype))  # (B, H, Tq, d)

    def extra_repr(self) -> str:
        return f"max_distance={self.max_distance}, beyond={self.beyond!r}, value_term={self.use_value_term}"


class ShawBlockBias(BlockBias):
    """Shaw's key bias for the blocked training path: r (B, H, Tq, 2k+1) = q·a^K/√d, a block laid
    out by rows (``ShawPE._bias_for_ranges``), its gradient gathered back per table column:
    the window's columns from the rows' window, each edge column plus the sum over its repeats."""

    # H100, bf16 training step: flex 1.62x of none against 1.89x at T = 3000, 1.58x against 2.27x at
    # 4000; slower up to 2000 (1.83x against 1.44x) (docs/benchmarks.md, "FlexAttention")
    flex_min_keys_cuda = 3000

    def __init__(self, pe: ShawPE, r: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor):
        self.pe, self.inputs = pe, (r,)
        self.n_queries = r.size(-2)
        self.q_pos, self.k0 = q_pos.tolist(), int(k_pos[0])
        self._r = r.detach()

    def block(self, b, s, e, n):
        top = self.q_pos[e - 1] - self.k0  # offset of the block's last row against the first key
        return self.pe._bias_for_ranges(self._r[b:b + 1, :, s:e], top, n)  # (1, H, e − s, n)

    def write_block(self, out, b, s, e, n):
        """The block by regions: keys left of the window for every row of the block take the left
        edge column (a broadcast of one value per row), keys right of it for every row the right
        one, and only the strip between them is laid out by rows (``_bias_for_ranges``)."""
        k = self.pe.max_distance
        i0, i1 = self.q_pos[s] - self.k0, self.q_pos[e - 1] - self.k0  # first and last row's query, in key columns
        left = min(n, max(0, i0 - k))  # columns j − i < −k for every row
        right = min(n, max(left, i1 + k + 1))  # from here j − i > k for every row
        r = self._r[b:b + 1, :, s:e]  # (1, H, e − s, 2k+1)
        clip = self.pe.beyond == "clip"
        if left:
            out[..., :left] = r[..., :1] if clip else 0
        if right < n:
            out[..., right:] = r[..., -1:] if clip else 0
        if right > left:
            out[..., left:right] = self.pe._bias_for_ranges(r, i1 - left, right - left)

    def score_mod(self):
        r, clip = self.inputs[0], self.pe.beyond == "clip"
        # tensors, not ints (see ``offset_origin``): j − i of query 0 against key 0, and k
        shift = torch.tensor(self.k0 - self.q_pos[0], device=r.device)
        k = torch.tensor(self.pe.max_distance, device=r.device)

        def add_shaw_bias(score, b, h, q_idx, kv_idx):
            rel = kv_idx - q_idx + shift  # j − i
            bias = r[b, h, q_idx, torch.clamp(rel, -k, k) + k]  # column c(j − i) of q_i·a^K/√d
            if not clip:  # beyond the window: the zero row
                bias = torch.where(rel.abs() <= k, bias, torch.zeros_like(bias))
            return score + bias

        return add_shaw_bias

    def add_block_grad(self, grads, b, s, e, n, d_s, rows=None):
        if grads[0] is None:
            return
        width = (e - s) + n - 1
        rows = offset_rows(d_s, width) if rows is None else rows  # (1, H, e − s, width): the row layout's gradient
        n_left, c_lo, c_hi, n_right = self.pe._row_spans(self.q_pos[e - 1] - self.k0, width)
        g = grads[0][b:b + 1, :, s:e]  # (1, H, e − s, 2k+1) view
        # add_ on views: ``g[...] += x`` would also copy each view onto itself (a setitem)
        if c_hi >= c_lo:
            g[..., c_lo:c_hi + 1].add_(rows[..., n_left:n_left + c_hi - c_lo + 1])
        if self.pe.beyond == "clip":
            if n_left:
                g[..., :1].add_(rows[..., :n_left].sum(-1, keepdim=True))
            if n_right:
                g[..., -1:].add_(rows[..., width - n_right:].sum(-1, keepdim=True))
