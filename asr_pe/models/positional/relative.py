"""Transformer-XL relative positional encoding as used by the Conformer (Dai et al., ACL 2019,
"Transformer-XL"; Gulati et al. 2020; ESPnet ``RelPositionMultiHeadedAttention``, "latest"
``rel_pos_type``).

    scores_ij = [(q_i + u)·k_j + (q_i + v)·p_{i−j}] / √d,     p = R·W_pos (no bias),

R the sinusoidal embedding of the signed offset r = i − j (rows for T−1 … −(T−1)),
interleaved [sin(r·ω_k), cos(r·ω_k)], ω_k = 10000^(−2k/D): sin is odd, so +r and −r get
different rows and the model can tell left from right. u, v ∈ (H, d) are learned per layer
(Glorot-uniform init, as ESPnet); W_pos is a per-layer D×D linear map split into heads.

Hooks: ``transform_qk`` adds u to q (the content term goes through the ordinary attention
path), ``logits_bias`` returns rel_shift((q + v)·pᵀ)/√d. For a query block at positions
s … s+Tq−1 against keys 0 … Tk−1 it builds the table for exactly the Tq + Tk − 1 offsets that
block needs, so blocked attention does no (2T−1)-wide work per block; for the whole sequence
that is the usual 2T − 1 rows and the pad-and-reshape ``rel_shift``. There is no length cap:
the table is computed for the positions at hand.

Positions must be contiguous increasing ranges (what ``MultiHeadAttention`` passes); this is
checked on CPU, where the check costs nothing, and other positions fall back to a gather.
ESPnet also scales the input by √D and applies dropout to the table; here input scaling
belongs to the input stage (combine with ``sinusoidal_sqrtd`` if wanted) and there is none.
"""

from __future__ import annotations

import math
import weakref

import torch
from torch import nn

from .base import AttentionPE, BlockBias, offset_origin, offset_rows, register_attention_pe
from .position_maps import build_position_map
from .sinusoidal import sinusoid

# Position tables shared by the query blocks of one attention call, keyed by the id of that
# call's key-position tensor and dropped when the tensor is (weakref.finalize): scoped to one
# call without any hook to say when a call ends.
_BLOCK_TABLES: dict[int, dict] = {}


def _tables_for(k_pos: torch.Tensor) -> dict:
    key = id(k_pos)
    tables = _BLOCK_TABLES.get(key)
    if tables is None:
        tables = _BLOCK_TABLES[key] = {}
        weakref.finalize(k_pos, _BLOCK_TABLES.pop, key, None)
    return tables


def rel_shift(x: torch.Tensor, n_keys: int | None = None) -> torch.Tensor:
    """Map scores against a descending offset table to scores per (query, key).

    x (..., Tq, Tq + Tk − 1) whose column c holds offset (Tq − 1 − c) + const for every row
    -> (..., Tq, Tk) with entry (a, b) = x[..., a, Tq − 1 − a + b], i.e. offset a − b + const.
    For Tq = Tk = T (the full sequence, x (..., T, 2T − 1) over offsets T−1 … −(T−1)) entry
    (i, j) uses offset i − j. Transformer-XL pads a zero column and re-cuts the rows; the same
    entries are a strided *view* of x: (a, b) sits at a·W + (Tq − 1 − a + b) = (Tq − 1) +
    a·(W − 1) + b, so row stride W − 1 and column stride 1 — no copy, no index tensor.
    """
    *lead, Tq, W = x.shape
    Tk = W - Tq + 1 if n_keys is None else n_keys
    assert W == Tq + Tk - 1, f"rel_shift: expected {Tq + Tk - 1} offset columns for {Tq}x{Tk}, got {W}"
    x = x.contiguous()
    strides = list(x.stride()[:-2]) + [W - 1, 1]
    return x.as_strided((*lead, Tq, Tk), strides, x.storage_offset() + Tq - 1)  # (..., Tq, Tk) view


def rel_shift_naive(x: torch.Tensor, n_keys: int | None = None) -> torch.Tensor:
    """Reference for ``rel_shift``: out[..., a, b] = x[..., a, Tq − 1 − a + b], by a loop."""
    *lead, Tq, W = x.shape
    Tk = W - Tq + 1 if n_keys is None else n_keys
    out = x.new_empty(*lead, Tq, Tk)
    for a in range(Tq):
        for b in range(Tk):
            out[..., a, b] = x[..., a, Tq - 1 - a + b]
    return out


def is_range(pos: torch.Tensor) -> bool:
    """True for consecutive increasing integer positions (what ``MultiHeadAttention`` passes)."""
    if pos.numel() <= 1:
        return True
    return bool((pos[1:] - pos[:-1] == 1).all())


@register_attention_pe("relative")
class RelativePE(AttentionPE):
    def __init__(self, d_model: int, n_heads: int, base: float = 10000.0, causal: bool = False,
                 position_map: dict | None = None, frame_shift_s: float = 0.04):
        super().__init__()
        assert d_model % n_heads == 0, f"d_model {d_model} not divisible by n_heads {n_heads}"
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.base = base
        self.causal = causal  # a causal mask hides i < j; the table works unchanged
        self.linear_pos = nn.Linear(d_model, d_model, bias=False)
        self.pos_bias_u = nn.Parameter(nn.init.xavier_uniform_(torch.empty(n_heads, self.d_head)))
        self.pos_bias_v = nn.Parameter(nn.init.xavier_uniform_(torch.empty(n_heads, self.d_head)))
        # a training-time remedy for long inputs (position_maps.py): offsets p_i − p_j of drawn
        # positions, scored through the sin/cos factorisation of ``relative_factors``
        self.position_map = build_position_map(position_map, frame_shift_s)

    def position_table(self, offsets: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """p for the given signed offsets r = i − j: (n,) -> (H, n, d)."""
        emb = sinusoid(offsets, self.d_model, self.base).to(dtype)  # (n, D), fp32 angles
        p = nn.functional.linear(emb, self.linear_pos.weight.to(dtype))  # (n, D)
        return p.view(-1, self.n_heads, self.d_head).transpose(0, 1)  # (H, n, d)

    def transform_qk(self, q, k, q_pos, k_pos):
        return q + self.pos_bias_u.to(q.dtype)[None, :, None, :], k  # (B, H, Tq, d)

    def logits_bias(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """rel_shift((q + v)·pᵀ)/√d for the query rows at q_pos against keys k_pos: (B, H, Tq, Tk)."""
        Tq, Tk = q.size(2), k_pos.numel()
        scale = 1.0 / math.sqrt(self.d_head)
        if self.drawn_positions is not None:  # per-utterance positions: no shared offset table
            q_rel, k_rel = self.relative_factors(q, self.drawn_positions[:, q_pos], self.drawn_positions[:, k_pos])
            return torch.matmul(q_rel * scale, k_rel.transpose(-2, -1))  # (B, H, Tq, Tk)
        # scaled before the product: a pass over (B, H, Tq, d) instead of one over (B, H, Tq, 2T)
        qv = (q + self.pos_bias_v.to(q.dtype)[None, :, None, :]) * scale  # (B, H, Tq, d)
        check = q_pos.device.type == "cpu"
        if not check or (is_range(q_pos) and is_range(k_pos)):
            # offsets (q_last − k_first) down to (q_first − k_last): Tq + Tk − 1 rows, descending
            top = q_pos[-1] - k_pos[0]
            p = self._block_table(q_pos, k_pos, q.dtype) if Tq < Tk else None
            if p is None:
                offsets = top - torch.arange(Tq + Tk - 1, device=q.device)  # (Tq + Tk − 1,)
                p = self.position_table(offsets, q.dtype)  # (H, Tq + Tk − 1, d)
            bd = torch.matmul(qv, p.transpose(-2, -1))  # (B, H, Tq, Tq + Tk − 1)
            return rel_shift(bd, Tk)  # (B, H, Tq, Tk), a view of bd
        # arbitrary positions: one table row per distinct offset, then a gather
        rel = q_pos[:, None] - k_pos[None, :]  # (Tq, Tk)
        offsets, inverse = torch.unique(rel, return_inverse=True)
        p = self.position_table(offsets, q.dtype)  # (H, n, d)
        bd = torch.matmul(qv, p.transpose(-2, -1))  # (B, H, Tq, n)
        B, H = bd.shape[:2]
        return torch.gather(bd, -1, inverse.expand(B, H, Tq, Tk))  # (B, H, Tq, Tk)

    def block_bias(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> "RelativeBlockBias | None":
        """(q + v)/√d and the position table p over the Tq + Tk − 1 offsets (``RelativeBlockBias``):
        each block of rows multiplies only the offsets it needs, (e − s) + n − 1 of them, so
        the q·R product costs about Tq·(Tk + rows) instead of Tq·(Tq + Tk − 1), and no
        (B, H, Tq, ·) score tensor is stored. None with drawn positions or non-range positions."""
        if self.drawn_positions is not None or (q_pos.device.type == "cpu" and not (is_range(q_pos) and is_range(k_pos))):
            return None
        Tq, Tk = q_pos.numel(), k_pos.numel()
        qv = (q + self.pos_bias_v.to(q.dtype)[None, :, None, :]) * (1.0 / math.sqrt(self.d_head))  # (B, H, Tq, d)
        offsets = (q_pos[-1] - k_pos[0]) - torch.arange(Tq + Tk - 1, device=q.device)  # descending i − j
        return RelativeBlockBias(qv, self.position_table(offsets, q.dtype))  # p: (H, Tq + Tk − 1, d)

    def _block_table(self, q_pos: torch.Tensor, k_pos: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """Rows of p for a query block inside the key range, sliced from one table over every
        offset of the keys (i − j for i, j in the key range: 2Tk − 1 rows), computed once per
        set of keys. Blocked attention calls this once per block with the same ``k_pos``
        tensor; without it each block would redo the D×D projection of ~Tk rows (for 60 min,
        ~1000 blocks x 3.7 GFLOP per layer). The table lives as long as ``k_pos`` does (one
        attention call); None when the block is not inside the key range."""
        Tq, Tk = q_pos.numel(), k_pos.numel()
        lo, hi = int(q_pos[0] - k_pos[0]), int(q_pos[-1] - k_pos[0])
        if lo < 0 or hi > Tk - 1:
            return None
        tables = _tables_for(k_pos)
        key = (id(self), dtype, torch.is_grad_enabled())
        full = tables.get(key)
        if full is None:
            offsets = (Tk - 1) - torch.arange(2 * Tk - 1, device=k_pos.device)  # Tk − 1 … −(Tk − 1)
            full = tables[key] = self.position_table(offsets, dtype)  # (H, 2Tk − 1, d)
        start = Tk - 1 - hi  # row of offset hi = q_last − k_first
        return full[:, start: start + Tq + Tk - 1]  # (H, Tq + Tk − 1, d)

    def relative_factors(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """(q_rel (B, H, Tq, D), k_rel (…, Tk, D)) with q_rel_i·k_rel_j = (q_i + v)·p_{i−j} for any
        positions (T,) or per utterance (B, T), integer or not.

        p_h(r) = W_h·R(r), W_h the head's (d, D) rows of W_pos, so (q_i + v)·p_h(i − j) =
        a_i·R(i − j) with a_i = W_hᵀ(q_i + v) ∈ R^D. R interleaves sin(rω_k), cos(rω_k), and
        sin((i−j)ω) = s_i c_j − c_i s_j, cos((i−j)ω) = c_i c_j + s_i s_j, hence
        a_i·R(i − j) = Σ_k c_j (a_2k s_i + a_2k+1 c_i) + s_j (a_2k+1 s_i − a_2k c_i):
        queries get [a_2k s_i + a_2k+1 c_i, a_2k+1 s_i − a_2k c_i]_k, keys [c_j, s_j]_k.
        Exact (angles in float64)."""
        B, H, _, d = q.shape
        w = self.linear_pos.weight.to(q.dtype).view(H, d, self.d_model)  # (H, d, D): W_h
        a = torch.matmul(q + self.pos_bias_v.to(q.dtype)[None, :, None, :], w)  # (B, H, Tq, D)
        omega = torch.exp(-math.log(self.base) * torch.arange(0, self.d_model, 2, device=q.device,
                                                               dtype=torch.float64) / self.d_model)  # (D/2,)
        ang_q = q_pos.to(torch.float64)[..., None] * omega  # (Tq, D/2) or (B, Tq, D/2)
        ang_k = k_pos.to(torch.float64)[..., None] * omega  # (Tk, D/2) or (B, Tk, D/2)
        if ang_q.dim() == 3:
            ang_q, ang_k = ang_q[:, None], ang_k[:, None]  # (B, 1, T, D/2): shared by the heads
        s_i, c_i = ang_q.sin().to(q.dtype), ang_q.cos().to(q.dtype)
        a_even, a_odd = a[..., 0::2], a[..., 1::2]  # (B, H, Tq, D/2) multiply sin / cos
        q_rel = torch.stack((a_even * s_i + a_odd * c_i, a_odd * s_i - a_even * c_i), dim=-1).flatten(-2)
        k_rel = torch.stack((ang_k.cos(), ang_k.sin()), dim=-1).flatten(-2).to(q.dtype)  # (…, Tk, D)
        return q_rel, k_rel

    def fused_qk(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """The whole score as one dot product, for SDPA without a bias: (q', k') of width d + D with
        q'_i·k'_j = (q_i + u)·k_j + (q_i + v)·p_{i−j} (then scaled by 1/√d as usual), from
        ``relative_factors``. No bias tensor, and SDPA's own backward gives every gradient;
        costs a (d + D)-wide QKᵀ instead of a d-wide one."""
        B, H = q.shape[:2]
        if self.drawn_positions is not None:
            q_pos, k_pos = self.drawn_positions[:, q_pos], self.drawn_positions[:, k_pos]  # (B, Tq), (B, Tk)
        q_rel, k_rel = self.relative_factors(q, q_pos, k_pos)
        q_aug = torch.cat((q + self.pos_bias_u.to(q.dtype)[None, :, None, :], q_rel), dim=-1)  # (B, H, Tq, d + D)
        k_aug = torch.cat((k, k_rel.expand(B, H, -1, -1)), dim=-1)  # (B, H, Tk, d + D)
        return q_aug, k_aug

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}"


class RelativeBlockBias(BlockBias):
    """Transformer-XL's position term for the blocked training path: qv (B, H, Tq, d) = (q + v)/√d,
    p (H, Tq + Tk − 1, d) over descending offsets. Block [s, e) × n keys: rel_shift(qv_s:e · p_cᵀ)
    with p_c the (e − s) + n − 1 rows it needs; its gradient d_rows = ``offset_rows``(d_s) gives
    d_qv = d_rows · p_c and d_p_c = d_rowsᵀ · qv_s:e (summed over the batch)."""

    # flex_min_keys_cuda stays None: through flex the (B, H, Tq, Tq + Tk − 1) product is kept for
    # the backward and the step was slower and larger at every length measured (H100, bf16:
    # T = 4000 2.48x of none and 18.2 GB against 2.29x and 10.4 GB; docs/benchmarks.md)

    def __init__(self, qv: torch.Tensor, p: torch.Tensor):
        self.inputs = (qv, p)
        self.n_queries = qv.size(-2)
        self._qv, self._p = qv.detach(), p.detach()

    def score_mod(self):
        qv, p = self.inputs
        # (B, H, Tq, Tq + Tk − 1): the q·R product over every offset, as the unblocked bias path
        # computes it; the score reads its column of offset i − j
        bd = torch.matmul(qv, p.transpose(-2, -1))
        last = offset_origin(self.n_queries, bd.device)

        def add_position_term(score, b, h, q_idx, kv_idx):
            return score + bd[b, h, q_idx, last - q_idx + kv_idx]

        return add_position_term

    def _rows(self, s: int, e: int, n: int) -> tuple[int, int]:
        return self.n_queries - e, (e - s) + n - 1  # first column (offset q_pos[e − 1] − k_pos[0]), width

    def block(self, b, s, e, n):
        c0, width = self._rows(s, e, n)
        rows = torch.matmul(self._qv[b:b + 1, :, s:e], self._p[:, c0:c0 + width].transpose(-2, -1))  # (1, H, e − s, width)
        return rel_shift(rows, n)  # (1, H, e − s, n)

    def add_block_grad(self, grads, b, s, e, n, d_s, rows=None):
        c0, width = self._rows(s, e, n)
        d_rows = offset_rows(d_s, width) if rows is None else rows  # (1, H, e − s, width)
        if grads[0] is not None:
            grads[0][b:b + 1, :, s:e] += torch.matmul(d_rows, self._p[:, c0:c0 + width])  # (1, H, e − s, d)
        if grads[1] is not None:
            grads[1][:, c0:c0 + width] += torch.matmul(d_rows[0].transpose(-2, -1), self._qv[b, :, s:e])  # (H, width, d)
