"""Attention masks shared by the readable and the fast attention paths."""

from __future__ import annotations

import torch


def make_pad_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """(B,) lengths -> (B, T) bool, True at padded positions."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def combine_mask(
    bias: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    hidden: torch.Tensor | None,
    dtype: torch.dtype,
) -> torch.Tensor | None:
    """Additive float mask broadcastable to (B, H, Tq, Tk): bias, finfo.min at padded keys and
    at the (Tq, Tk) ``hidden`` ones (future keys of a causal layer, keys outside a window)."""
    neg = torch.finfo(dtype).min
    mask = bias
    if key_padding_mask is not None:
        pad = key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
        mask = pad.to(dtype) * neg if mask is None else mask.masked_fill(pad, neg)
    if hidden is not None:
        mask = hidden.to(dtype) * neg if mask is None else mask.masked_fill(hidden, neg)
    return mask


def hidden_keys(q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool, window: int | None) -> torch.Tensor | None:
    """(Tq, Tk) bool, True where query q_pos[a] may not see key k_pos[b]: a future key of a
    causal layer, or a key more than ``window`` frames away (|i − j| > window); None if neither."""
    hidden = (k_pos[None, :] > q_pos[:, None]) if causal else None  # (Tq, Tk)
    if window is not None:
        far = (q_pos[:, None] - k_pos[None, :]).abs() > window  # (Tq, Tk)
        hidden = far if hidden is None else hidden | far
    return hidden
