"""The FlexAttention path (``torch.nn.attention.flex_attention``): a PE's bias as a ``score_mod``,
padding, causality and the window remedy as a block mask.

A PE whose bias depends on the offset i − j offers it in compact form (``AttentionPE.block_bias``,
a ``positional.base.BlockBias``: T5's per-offset table, ALiBi's slopes per offset, Shaw's
q·a^K rows, Transformer-XL's (q + v)·p rows); ``BlockBias.score_mod`` reads one entry of that
compact tensor per score, so the (B or 1, H, Tq, Tk) bias, its gradient and the probabilities are
never materialised: the compiled kernel (Triton, CUDA) computes scores tile by tile and sums the
bias gradient into the compact tensors. A block mask skips whole tiles of padding and, with the
window remedy, of keys outside the window.

Where it runs:
* ``bias_mode="auto"`` on CUDA, unblocked attention without attention dropout, from the number of
  keys where the GPU check measured it faster than the SDPA path for the layout
  (``BlockBias.flex_min_keys_cuda``: T5 and Shaw from 3000, ALiBi from 4000, relative never;
  docs/benchmarks.md, "FlexAttention"); it always used much less memory;
* ``bias_mode="flex"`` on any device (CUDA: compiled; CPU: torch's eager implementation, which
  materialises the scores and has no backward, so only without gradients: used by the tests to
  hold the path to the reference path's outputs).
Everything else keeps the paths of ``attention_fast_paths.py``.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import torch

from .positional.base import BlockBias

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:  # pragma: no cover - the pinned torch has it
    create_block_mask = flex_attention = None


def flex_available() -> bool:
    return flex_attention is not None


def may_use_flex(bias_mode: str, device_type: str, dropout_p: float) -> bool:
    """The cheap part of ``use_flex``, checked before the PE builds its compact bias."""
    if device_type == "cpu" and torch.is_grad_enabled():
        return False  # torch has no CPU backward for flex: "flex" means flex wherever it runs
    return (dropout_p == 0 and flex_available()
            and (bias_mode == "flex" or (bias_mode == "auto" and device_type == "cuda")))


# torch's compiled flex kernel: "NYI: embedding dimension of the query, key, and value must be at
# least 16" (torch 2.11 on an H100, head size 4)
MIN_HEAD_SIZE = 16


def use_flex(bias_mode: str, device_type: str, dropout_p: float, layout: BlockBias | None,
             head_size: int = MIN_HEAD_SIZE, n_keys: int = 0) -> bool:
    """Whether an attention call whose PE offered ``layout`` takes the flex path (see the module
    docstring); flex has no attention dropout, and compiled (CUDA) no head below 16."""
    if layout is None or dropout_p > 0 or not flex_available():
        return False
    if device_type == "cuda" and head_size < MIN_HEAD_SIZE:
        return False
    if bias_mode == "flex":
        return True
    least = layout.flex_min_keys_cuda
    return bias_mode == "auto" and device_type == "cuda" and least is not None and n_keys >= least


@lru_cache(maxsize=1)
def _compiled_flex():
    # dynamic: batches of the length-bucketed loader have many lengths; one kernel for all of them
    # instead of a recompile per length (and torch's recompile limit falling back to eager)
    return torch.compile(flex_attention, dynamic=True)


def _run_flex(q, k, v, score_mod, block_mask, scale):
    if q.is_cuda:
        return _compiled_flex()(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)
    with warnings.catch_warnings():  # "called without torch.compile()": intended on CPU (tests)
        warnings.simplefilter("ignore")
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


# One block mask per forward pass: every layer gets the same key_padding_mask tensor, so the mask
# is built once and reused while that tensor is the one passed (held here, so its id is not reused).
_mask_cache: dict = {}


def block_mask_for(key_padding_mask: torch.Tensor | None, n_queries: int, n_keys: int, causal: bool,
                   window: int | None, device: torch.device):
    """The block mask hiding padded keys ((B, Tk) True = pad, taken to be a suffix of each
    utterance), future keys (``causal``) and keys more than ``window`` frames away; None when
    nothing is hidden. Queries and keys are the frames 0…Tq−1 and 0…Tk−1."""
    if key_padding_mask is None and not causal and window is None:
        return None
    key = (n_queries, n_keys, causal, window, str(device))
    hit = _mask_cache.get("entry")
    if hit is not None and hit[0] is key_padding_mask and hit[1] == key:
        return hit[2]
    lengths = None if key_padding_mask is None else (~key_padding_mask).sum(1)  # (B,) real keys per utterance

    def mask_mod(b, h, q_idx, kv_idx):
        keep = q_idx >= 0  # all True, shaped like the indices
        if lengths is not None:
            keep = keep & (kv_idx < lengths[b])
        if causal:
            keep = keep & (kv_idx <= q_idx)
        if window is not None:
            keep = keep & ((q_idx - kv_idx).abs() <= window)
        return keep

    B = None if key_padding_mask is None else key_padding_mask.size(0)
    mask = create_block_mask(mask_mod, B, None, n_queries, n_keys, device=device)
    _mask_cache["entry"] = (key_padding_mask, key, mask)
    return mask


def attend_flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: BlockBias,
                key_padding_mask: torch.Tensor | None, causal: bool, window: int | None) -> torch.Tensor:
    """softmax(QKᵀ/√d + bias + masks)·V with the bias read from ``layout`` by its ``score_mod``.
    q (B, H, Tq, d) (already transformed by the PE), k/v (B, H, Tk, d) -> (B, H, Tq, d).

    A query row whose keys are all hidden (none here: every utterance has a key) would get zeros
    where the other paths average; padded query rows see their utterance's real keys as there."""
    Tq, Tk = q.size(2), k.size(2)
    mask = block_mask_for(key_padding_mask, Tq, Tk, causal, window, q.device)
    return _run_flex(q, k, v, layout.score_mod(), mask, 1.0 / math.sqrt(q.size(-1)))
