"""Transformer and Conformer encoders over already-subsampled features.

``enc = build_encoder(kind="conformer"|"transformer", pe="rope", d_model=144, n_heads=4, n_layers=6)``
``out, out_lengths = enc(x (B, T, D), lengths)``;
``out, out_lengths, attn = enc(x, lengths, return_attention=True)`` with attn a list (one per
layer) of (B, H, T, T) weights from the reference path (for REM, the mixed weights).

Transformer blocks are pre-LN by default (``norm_first=False`` gives the post-LN block of the
original Transformer, as used in the CAPE paper). Conformer blocks follow Gulati et al. 2020:
½FFN → MHSA → conv module → ½FFN → LayerNorm. The conv module uses LayerNorm instead of
BatchNorm by default so that an utterance's output never depends on what it is batched with.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from asr_pe.errors import UserError
from .attention import MultiHeadAttention, make_pad_mask
from .positional import AttentionPE, PositionalEncoding, build_positional


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, dropout: float, activation: str = "relu"):
        super().__init__()
        act = {"relu": nn.ReLU, "swish": nn.SiLU, "gelu": nn.GELU}[activation]
        self.net = nn.Sequential(
            nn.Linear(d_model, ffn_dim), act(), nn.Dropout(dropout), nn.Linear(ffn_dim, d_model)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ConvModule(nn.Module):
    """Pointwise conv + GLU → depthwise conv → norm → SiLU → pointwise conv; padding zeroed."""

    def __init__(self, d_model: int, kernel: int, dropout: float, norm: str = "layer_norm"):
        super().__init__()
        assert kernel % 2 == 1, f"conv kernel must be odd to keep frames aligned, got {kernel}"
        self.pw1 = nn.Conv1d(d_model, 2 * d_model, 1)
        self.dw = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2, groups=d_model)
        assert norm in ("layer_norm", "batch_norm"), f"bad conv norm {norm!r}"
        self.norm_kind = norm
        self.norm = nn.LayerNorm(d_model) if norm == "layer_norm" else nn.BatchNorm1d(d_model)
        self.pw2 = nn.Conv1d(d_model, d_model, 1)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor | None) -> torch.Tensor:
        y = nn.functional.glu(self.pw1(x.transpose(1, 2)), dim=1)  # (B, D, T)
        if pad_mask is not None:
            y = y.masked_fill(pad_mask[:, None, :], 0.0)  # padded frames must not feed the depthwise conv
        y = self.dw(y)
        if self.norm_kind == "layer_norm":
            y = self.norm(y.transpose(1, 2)).transpose(1, 2)
        else:
            y = self.norm(y)
        y = self.pw2(nn.functional.silu(y))
        return self.drop(y.transpose(1, 2))  # (B, T, D)


class TransformerLayer(nn.Module):
    def __init__(self, d_model, n_heads, ffn_dim, dropout, attn_dropout, norm_first=True, **attn_opts):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, attn_dropout, **attn_opts)
        self.ffn = FeedForward(d_model, ffn_dim, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, pad_mask, pe: AttentionPE | None = None, need_weights=False):
        if self.norm_first:
            a, w = self.attn(self.norm1(x), pad_mask, pe=pe, need_weights=need_weights)
            x = x + self.drop(a)
            x = x + self.drop(self.ffn(self.norm2(x)))
        else:
            a, w = self.attn(x, pad_mask, pe=pe, need_weights=need_weights)
            x = self.norm1(x + self.drop(a))
            x = self.norm2(x + self.drop(self.ffn(x)))
        return x, w


class ConformerLayer(nn.Module):
    def __init__(self, d_model, n_heads, ffn_dim, dropout, attn_dropout, conv_kernel=15,
                 conv_norm="layer_norm", **attn_opts):
        super().__init__()
        self.ffn1 = FeedForward(d_model, ffn_dim, dropout, "swish")
        self.ffn2 = FeedForward(d_model, ffn_dim, dropout, "swish")
        self.attn = MultiHeadAttention(d_model, n_heads, attn_dropout, **attn_opts)
        self.conv = ConvModule(d_model, conv_kernel, dropout, conv_norm)
        self.norm_ffn1, self.norm_attn = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm_conv, self.norm_ffn2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm_out = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, pad_mask, pe: AttentionPE | None = None, need_weights=False):
        x = x + 0.5 * self.drop(self.ffn1(self.norm_ffn1(x)))
        a, w = self.attn(self.norm_attn(x), pad_mask, pe=pe, need_weights=need_weights)
        x = x + self.drop(a)
        x = x + self.conv(self.norm_conv(x), pad_mask)
        x = x + 0.5 * self.drop(self.ffn2(self.norm_ffn2(x)))
        return self.norm_out(x), w


class Encoder(nn.Module):
    def __init__(self, layers: nn.ModuleList, pe: PositionalEncoding, d_model: int, dropout: float,
                 final_norm: bool):
        super().__init__()
        self.layers = layers
        self.pe = pe
        self.input_dropout = nn.Dropout(dropout)
        self.final_norm = nn.LayerNorm(d_model) if final_norm else nn.Identity()
        self.d_model = d_model

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, return_attention: bool = False):
        assert x.dim() == 3 and x.size(-1) == self.d_model, f"expected (B, T, {self.d_model}), got {tuple(x.shape)}"
        pad_mask = make_pad_mask(lengths, x.size(1))  # (B, T)
        # no padded frame (one long recording, equal lengths): the layers skip every masking step
        # (a (B, H, block, T) combine per attention block in long-form inference)
        layer_mask = pad_mask if bool(pad_mask.any()) else None
        x = self.input_dropout(self.pe.forward_input(x, lengths))
        attn = []
        for i, layer in enumerate(self.layers):
            x, w = layer(x, layer_mask, pe=self.pe.layer(i), need_weights=return_attention)
            attn.append(w)
        x = self.final_norm(x).masked_fill(pad_mask[..., None], 0.0)
        return (x, lengths, attn) if return_attention else (x, lengths)

    def set_block_size(self, block_size: int | None) -> None:
        """Compute attention in query blocks of this many rows (None: unblocked)."""
        for layer in self.layers:
            layer.attn.block_size = block_size

    def set_attention_window(self, frames: int | None) -> None:
        """Inference remedy: every query attends only to keys within ±``frames`` (None: all keys)."""
        if frames is not None and int(frames) < 0:
            raise ValueError(f"attention window must be >= 0 frames, got {frames}")
        for i, layer in enumerate(self.layers):
            layer.attn.window = None if frames is None else int(frames)
            hook = self.pe.layer(i)
            if hook is not None:
                hook.window = layer.attn.window

    def set_logit_scaling(self, train_frames: int | None) -> None:
        """Inference remedy: logits × max(1, ln n / ln ``train_frames``), n an utterance's frames
        (None: off)."""
        if train_frames is not None and int(train_frames) < 2:
            raise ValueError(f"logit scaling needs a training length of >= 2 frames, got {train_frames}")
        for layer in self.layers:
            layer.attn.logit_scale_keys = None if train_frames is None else int(train_frames)


class EncoderConfigError(UserError, ValueError):
    """An encoder setting that cannot work; the message names the config key."""


def build_encoder(
    kind: str = "conformer",
    pe: Any = "none",
    d_model: int = 144,
    n_heads: int = 4,
    n_layers: int = 6,
    ffn_dim: int | None = None,
    dropout: float = 0.1,
    attn_dropout: float = 0.0,
    conv_kernel: int = 15,
    conv_norm: str = "layer_norm",
    norm_first: bool = True,
    frame_shift_s: float = 0.04,
    bias_mode: str = "auto",
    block_size: int | None = None,
    position_map: Any = None,
    **pe_options: Any,
) -> Encoder:
    """Build an encoder; ``pe`` is a name, ``"input+attention"`` or a mapping (see positional).
    ``position_map``: a training-time remedy handed to the PE stage that reads positions."""
    if d_model % n_heads:
        divisors = [h for h in range(1, min(d_model, 16) + 1) if d_model % h == 0]
        raise EncoderConfigError(
            f"encoder.d_model={d_model} is not divisible by encoder.n_heads={n_heads}: every head gets "
            f"d_model / n_heads channels; choose n_heads in {divisors} or another d_model"
        )
    ffn_dim = ffn_dim or 4 * d_model
    attn_opts = {"bias_mode": bias_mode, "block_size": block_size}
    if kind == "transformer":
        layers = [TransformerLayer(d_model, n_heads, ffn_dim, dropout, attn_dropout, norm_first, **attn_opts)
                  for _ in range(n_layers)]
        final_norm = norm_first  # a pre-LN stack needs a last LayerNorm; post-LN already ends in one
    elif kind == "conformer":
        layers = [ConformerLayer(d_model, n_heads, ffn_dim, dropout, attn_dropout, conv_kernel, conv_norm,
                                 **attn_opts) for _ in range(n_layers)]
        final_norm = False  # every Conformer block ends in a LayerNorm
    else:
        raise EncoderConfigError(f"unknown encoder kind {kind!r} (encoder.kind); choose 'conformer' or 'transformer'")
    pos = build_positional(pe, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                           frame_shift_s=frame_shift_s, position_map=position_map, **pe_options)
    return Encoder(nn.ModuleList(layers), pos, d_model, dropout, final_norm)
