"""Base classes and registry for positional encodings.

A PE acts at one of two stages (see docs/design.md, "Positional encodings"):

* input stage (`InputPE`): added to the subsampled features before the first block;
* attention stage (`AttentionPE`): hooks called by `MultiHeadAttention` of every layer.

Attention hooks receive the absolute integer positions of the query rows (`q_pos`) and key
columns (`k_pos`) being computed, never a length, so attention can be evaluated in query
blocks and no PE needs a table sized for the longest input.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import torch
from torch import nn

from asr_pe.errors import UserError


# Where a PE acts (``family`` of its class), in the order the study's figures and tables show them.
FAMILY_ORDER = ("input", "q/k rotation", "logit bias", "after softmax")


class InputPE(nn.Module):
    """Input-stage PE: ``forward(x (B, T, D), lengths (B,)) -> (B, T, D)``."""

    family = "input"

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


class AttentionPE(nn.Module):
    """Attention-stage PE for one layer. Every hook defaults to "no change".

    ``fused_ok`` says whether, given ``transform_qk`` and ``logits_bias``, the output may be
    computed by ``scaled_dot_product_attention``; PEs that need the attention weights
    themselves (e.g. a value-side term) set it to False and implement ``value_term``.
    """

    fused_ok: bool = True
    family = "logit bias"  # where it acts (``FAMILY_ORDER``); RoPE and REM say otherwise
    # An inference window in frames (set with ``Encoder.set_attention_window``, None: off). The
    # attention hides keys farther than this itself; only a PE that mixes values outside the
    # softmax (REM's P·V in ``mix_output``) must honour it too.
    window: int | None = None
    # Positions (B, T) of this forward pass from a position map (position_maps.py), set by
    # ``PositionalEncoding.forward_input``; None: frame t is at position t. Only PEs built
    # with a ``position_map`` option (RoPE, relative) read it, as drawn[:, q_pos].
    drawn_positions: torch.Tensor | None = None

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q (B, H, Tq, d), k (B, H, Tk, d) -> rotated/shifted q, k used for the content term."""
        return q, k

    def logits_bias(
        self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """Additive term in logit units (after the 1/sqrt(d) scaling), broadcastable to
        (B, H, Tq, Tk). ``q`` is the untransformed query block."""
        return None

    def block_bias(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> "BlockBias | None":
        """Optional: ``logits_bias`` in compact form (``BlockBias``), for CPU training with a
        learned bias (``MultiHeadAttention`` then attends in cache-sized blocks and never builds
        the (B or 1, H, Tq, Tk) bias or its gradient). ``q`` is untransformed. None: not offered
        (e.g. positions that are not ranges)."""
        return None

    def fused_qk(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Optional: widened (q', k'), (B, H, Tq, d'), (B, H, Tk, d'), whose dot products are the
        whole logit (content + ``logits_bias``) times √d, d the head width — so SDPA can run
        without a bias tensor (``MultiHeadAttention`` uses it for learned biases in CPU
        training). ``q``, ``k`` are untransformed. None: not offered."""
        return None

    def value_term(
        self, weights: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """Extra output from the attention weights (B, H, Tq, Tk) -> (B, H, Tq, d)."""
        return None

    def mix_output(
        self,
        out: torch.Tensor,
        v: torch.Tensor,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        key_padding_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """Post-softmax mixing (REM). out (B, H, Tq, d), v (B, H, Tk, d)."""
        return out

    def mix_weights(
        self,
        weights: torch.Tensor,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        key_padding_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """The effective attention weights for diagnostics (REM mixes P in)."""
        return weights

    @classmethod
    def build_layers(cls, n_layers: int, **kwargs: Any) -> nn.ModuleList:
        """One hook module per layer. Override to share parameters across layers (T5)."""
        return nn.ModuleList(cls(**kwargs) for _ in range(n_layers))


INPUT_PES: dict[str, type[InputPE]] = {}
ATTENTION_PES: dict[str, type[AttentionPE]] = {}


def register_input_pe(name: str) -> Callable[[type[InputPE]], type[InputPE]]:
    def deco(cls: type[InputPE]) -> type[InputPE]:
        assert name not in INPUT_PES and name not in ATTENTION_PES, f"PE {name!r} registered twice"
        INPUT_PES[name] = cls
        return cls

    return deco


def register_attention_pe(name: str) -> Callable[[type[AttentionPE]], type[AttentionPE]]:
    def deco(cls: type[AttentionPE]) -> type[AttentionPE]:
        assert name not in INPUT_PES and name not in ATTENTION_PES, f"PE {name!r} registered twice"
        ATTENTION_PES[name] = cls
        return cls

    return deco


class UnknownPEError(UserError, ValueError):
    pass


def constructor_kwargs(
    cls: type, common: Mapping[str, Any], options: Mapping[str, Any], name: str
) -> dict[str, Any]:
    """Keyword arguments for ``cls``: the common ones its signature takes, plus ``options``.

    Unknown options get a clear error rather than a TypeError deep in a constructor."""
    params = inspect.signature(cls.__init__).parameters
    takes_var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    unknown = [k for k in options if k not in params and not takes_var_kw]
    if unknown:
        valid = sorted(k for k in params if k not in ("self",) and k not in common)
        raise UnknownPEError(f"pe {name!r}: unknown option(s) {unknown}; valid options: {valid}")
    kwargs = {k: v for k, v in common.items() if k in params or takes_var_kw}
    kwargs.update(options)
    return kwargs


# --- biases that depend on the offset i − j only --------------------------------------------
def _is_range(pos: torch.Tensor) -> bool:
    return pos.numel() <= 1 or bool((pos[1:] - pos[:-1] == 1).all())


def descending_offsets(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
    """The Tq + Tk − 1 offsets i − j of a query range against a key range, largest first
    (q_last − k_first … q_first − k_last), or None when the positions are not consecutive
    (checked on CPU; other devices are assumed to get ranges, as ``MultiHeadAttention`` passes,
    to avoid a host sync)."""
    if q_pos.device.type == "cpu" and not (_is_range(q_pos) and _is_range(k_pos)):
        return None
    top = q_pos[-1] - k_pos[0]
    return top - torch.arange(q_pos.numel() + k_pos.numel() - 1, device=q_pos.device)


def toeplitz(table: torch.Tensor, n_queries: int, n_keys: int) -> torch.Tensor:
    """Lay out per-offset values as a matrix: table (..., Tq + Tk − 1) over
    ``descending_offsets`` -> (..., Tq, Tk) with entry (a, b) = table[..., Tq − 1 − a + b], the
    value of offset q_pos[a] − k_pos[b]. One row-major copy (row a is a slice of the table),
    so an offset-only bias costs one pass over Tq·Tk instead of per-entry arithmetic.

    Row-major matters: ``unfold(...).flip(-2)`` gives the same values, but for a wide block
    (Tq ≪ Tk, as in blocked long-form inference) torch lays the flipped copy out column-major
    (strides (..., 1, Tq)), and SDPA reading such a mask took 2.3× as long as a row-major one
    (H = 4, 93 × 90 000: 242 vs 104 ms, 1 thread); selecting the rows of a row-major table
    gives row-major always."""
    assert table.size(-1) == n_queries + n_keys - 1, f"toeplitz: {table.size(-1)} offsets for {n_queries}x{n_keys}"
    # the copy below keeps the table's layout, so a transposed table (T5's (H, W) comes from a
    # (W, H) lookup) must be made row-major first: a cheap copy of Tq + Tk − 1 values per head
    windows = table.contiguous().unfold(-1, n_keys, 1)  # (..., Tq, Tk) view: window m = offsets of row Tq − 1 − m
    rows = torch.arange(n_queries - 1, -1, -1, device=table.device)
    return windows[..., rows, :]  # (..., Tq, Tk), contiguous


def offset_rows(d: torch.Tensor, width: int) -> torch.Tensor:
    """The transpose of ``relative.rel_shift``: d (..., Tq, Tk) -> (..., Tq, width = Tq + Tk − 1)
    with d[..., a, b] at column Tq − 1 − a + b and zeros elsewhere, i.e. the gradient of a row
    table of descending offsets from the gradient of its (Tq, Tk) layout. One strided copy (the
    same view as ``rel_shift``), no index tensor and no scatter."""
    *lead, Tq, Tk = d.shape
    assert width == Tq + Tk - 1, f"offset_rows: {width} columns for {Tq}x{Tk}"
    rows = d.new_zeros(*lead, Tq, width)
    strides = list(rows.stride()[:-2]) + [width - 1, 1]
    rows.as_strided(d.shape, strides, Tq - 1).copy_(d)  # (..., Tq, Tk) view of the rows
    return rows  # (..., Tq, width)


def offset_origin(n_queries: int, device: torch.device) -> torch.Tensor:
    """Tq − 1 as a 0-dim int tensor: the column of offset i − j = 0 for query 0, read by a
    FlexAttention ``score_mod``. A tensor, not an int: torch.compile with dynamic shapes makes an
    int taken from a shape symbolic, and Inductor (torch 2.11) fails to lower a score_mod
    capturing one ("'ShapeAsConstantBuffer' object has no attribute 'dtype'", seen on an H100)."""
    return torch.tensor(n_queries - 1, device=device)


class BlockBias:
    """A PE's ``logits_bias`` in a compact form, for CPU training with a learned bias
    (``attention_fast_paths.SDPAWithBlockBias``): it lays out the bias of any block of query
    rows [s, e) against the first n keys of utterance b, and takes back that block's score
    gradient into the gradients of its compact tensors. So the (B or 1, H, Tq, Tk) bias and its
    gradient are never materialised, and a bias made of offsets (T5's table, Shaw's q·a rows,
    Transformer-XL's (q + v)·p) gets its gradient per offset from each cache-sized block
    instead of through a scatter or a strided-view backward over the whole matrix.

    ``inputs``: the compact tensors (the blocked path's autograd inputs). ``block`` returns
    (1, H, e − s, n) from their values (no graph); ``add_block_grad`` adds a block's d_s
    (1, H, e − s, n) into ``grads`` (aligned with ``inputs``, None where no gradient is needed)."""

    inputs: tuple[torch.Tensor, ...] = ()

    def block(self, b: int, s: int, e: int, n: int) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def add_block_grad(self, grads: list, b: int, s: int, e: int, n: int, d_s: torch.Tensor,
                       rows: torch.Tensor | None = None) -> None:  # pragma: no cover
        """``rows``: ``offset_rows(d_s, (e − s) + n − 1)`` when the caller has it already."""
        raise NotImplementedError

    def write_block(self, out: torch.Tensor, b: int, s: int, e: int, n: int) -> None:
        """``block(b, s, e, n)`` written into ``out`` (1, H, e − s, n), a buffer or a slice of
        one with unit stride along keys: the blocked backward adds q·kᵀ to it in place, and a
        layout that can write its regions directly saves building the block first."""
        out.copy_(self.block(b, s, e, n))

    # FlexAttention (``attention_flex.py``): from how many keys the flex path measured faster than
    # the SDPA path on CUDA for this layout, so ``bias_mode="auto"`` takes it there (None: never)
    flex_min_keys_cuda: int | None = None

    def score_mod(self):
        """The bias as a FlexAttention ``score_mod(score, b, h, q_idx, kv_idx)`` over the whole
        (Tq, Tk) call, reading the compact tensors (their gradients flow through it), or None when
        not offered. Indices are those of the call: query q_idx is at q_pos[0] + q_idx."""
        return None

    def full(self, b: int, n: int, rows: int) -> torch.Tensor:
        """Utterance b's bias against its first n keys, (1, H, Tq, n), built ``rows`` query rows
        at a time (a layout that computes its rows, e.g. by a product, then does only the
        Tq·(rows + n) work those blocks need)."""
        Tq = self.n_queries
        first = self.block(b, 0, min(rows, Tq), n)
        if rows >= Tq:
            return first
        out = first.new_empty(*first.shape[:2], Tq, n)  # (1, H, Tq, n)
        out[:, :, :rows] = first
        for s in range(rows, Tq, rows):
            e = min(Tq, s + rows)
            self.write_block(out[:, :, s:e], b, s, e, n)
        return out


class ToeplitzBias(BlockBias):
    """A bias of the offset i − j only, shared by the batch: per_offset (H, Tq + Tk − 1) over
    ``descending_offsets`` (T5, ALiBi with a learned scale). The (1, H, Tq, Tk) layout is built
    once (``toeplitz``) and blocks are views of it; a block's gradient is summed per offset
    (its diagonals, ``offset_rows``) into the (H, Tq + Tk − 1) gradient."""

    @property
    def flex_min_keys_cuda(self) -> int:
        # H100, bf16 training step (docs/benchmarks.md, "FlexAttention"): a learned table (T5)
        # faster through flex from T = 3000 (1.50x of none against 1.83x; 2000: 1.62 vs 1.59),
        # fixed slopes (ALiBi) from T = 4000 (1.08x against 1.31x; 3000: 1.24 vs 1.10)
        return 3000 if self.inputs[0].requires_grad else 4000

    def __init__(self, per_offset: torch.Tensor, n_queries: int, n_keys: int):
        assert per_offset.size(-1) == n_queries + n_keys - 1, "ToeplitzBias: one value per offset"
        self.inputs = (per_offset,)
        self.n_queries, self.n_keys = n_queries, n_keys
        self._laid_out: torch.Tensor | None = None

    def laid_out(self) -> torch.Tensor:
        if self._laid_out is None:
            self._laid_out = toeplitz(self.inputs[0].detach(), self.n_queries, self.n_keys).unsqueeze(0)  # (1, H, Tq, Tk)
        return self._laid_out

    def block(self, b, s, e, n):
        return self.laid_out()[:, :, s:e, :n]  # (1, H, e − s, n) view

    def full(self, b, n, rows):
        return self.laid_out()[..., :n]

    def score_mod(self):
        per_offset, last = self.inputs[0], offset_origin(self.n_queries, self.inputs[0].device)

        def add_offset_bias(score, b, h, q_idx, kv_idx):
            return score + per_offset[h, last - q_idx + kv_idx]  # column of offset i − j

        return add_offset_bias

    def add_block_grad(self, grads, b, s, e, n, d_s, rows=None):
        if grads[0] is None:
            return
        width = (e - s) + n - 1
        c0 = self.n_queries - e  # column of offset q_pos[e − 1] − k_pos[0] in the whole table
        rows = offset_rows(d_s, width) if rows is None else rows  # (1, H, e − s, width)
        grads[0][:, c0:c0 + width] += rows[0].sum(1)  # (H, width): the diagonals of d_s
