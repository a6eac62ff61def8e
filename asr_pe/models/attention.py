"""The one multi-head attention used by every encoder and decoder.

Paths (all give the same result to float tolerance; tests hold them to it):

* fused: ``F.scaled_dot_product_attention`` for plain attention and for PEs that only rotate
  q/k (RoPE) — and for additive biases when ``bias_mode="sdpa"``;
* explicit: softmax(QKᵀ/√d + bias)·V written out — the reference path, used for attention
  weights (``need_weights``), for PEs that need the weights (``fused_ok = False``) and, by
  default on CPU, for additive biases (measured faster there than SDPA with a float mask);
* blocked: either of the above over query blocks of ``block_size`` rows, so a long input never
  materialises a T×T matrix. PE hooks receive the query/key positions of the block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .positional.base import AttentionPE


def make_pad_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """(B,) lengths -> (B, T) bool, True at padded positions."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def _combine_mask(
    bias: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    causal_offset: int | None,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor | None:
    """Additive float mask broadcastable to (B, H, Tq, Tk): bias, -inf at padded/future keys."""
    neg = torch.finfo(dtype).min
    mask = bias
    if key_padding_mask is not None:
        pad = key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
        mask = pad.to(dtype) * neg if mask is None else mask.masked_fill(pad, neg)
    if causal_offset is not None:
        future = k_pos[None, :] > q_pos[:, None]  # (Tq, Tk)
        mask = future.to(dtype) * neg if mask is None else mask.masked_fill(future, neg)
    return mask


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Explicit attention. q (B, H, Tq, d), k/v (B, H, Tk, d), mask additive.

    Returns (out, weights, dropped weights): ``weights`` for diagnostics, the dropped ones are
    what the output (and any value-side PE term) is computed from."""
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return torch.matmul(dropped, v), weights, dropped


class MultiHeadAttention(nn.Module):
    """Multi-head attention with positional hooks (see ``positional.base.AttentionPE``).

    forward(x (B, Tq, D), key_padding_mask (B, Tk) True=pad, *, pe, kv (B, Tk, D) for
    cross-attention, causal, need_weights) -> (out (B, Tq, D), weights (B, H, Tq, Tk) | None)
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias_mode: str = "auto",
        block_size: int | None = None,
    ):
        super().__init__()
        assert d_model % n_heads == 0, f"d_model {d_model} not divisible by n_heads {n_heads}"
        assert bias_mode in ("auto", "sdpa", "explicit"), f"bad bias_mode {bias_mode!r}"
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.bias_mode = bias_mode
        # Inputs with more query rows than this are computed in blocks (None: never).
        self.block_size = block_size
        self.use_reference = False  # tests flip this to force the explicit path

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, d)

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        *,
        pe: AttentionPE | None = None,
        kv: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, Tq, D = x.shape
        D_ = self.d_model
        if kv is None:
            q, k, v = self.in_proj(x).split(D_, dim=-1)  # 3 x (B, T, D)
        else:
            w, b = self.in_proj.weight, self.in_proj.bias
            q = F.linear(x, w[:D_], b[:D_])
            k, v = F.linear(kv, w[D_:], b[D_:]).split(D_, dim=-1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, H, T, d)
        Tk = k.size(2)
        q_pos = torch.arange(Tq, device=x.device)
        k_pos = torch.arange(Tk, device=x.device)
        q_raw = q
        if pe is not None:
            q, k = pe.transform_qk(q, k, q_pos, k_pos)

        block = self.block_size if (self.block_size and Tq > self.block_size and not need_weights) else Tq
        outs, weights = [], []
        for s in range(0, Tq, block):
            e = min(Tq, s + block)
            o, w_ = self.attend_block(
                q[:, :, s:e], q_raw[:, :, s:e], k, v, q_pos[s:e], k_pos, key_padding_mask, pe, causal, need_weights
            )
            outs.append(o)
            weights.append(w_)
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)  # (B, H, Tq, d)
        out = out.transpose(1, 2).reshape(B, Tq, D)  # (B, Tq, D)
        return self.out_proj(out), (weights[0] if need_weights else None)

    def attend_block(self, q, q_raw, k, v, q_pos, k_pos, key_padding_mask, pe, causal, need_weights):
        """Attention for one block of query rows. Returns out (B, H, Tb, d), weights or None."""
        dropout_p = self.dropout if self.training else 0.0
        bias = pe.logits_bias(q_raw, q_pos, k_pos) if pe is not None else None
        explicit = (
            need_weights
            or self.use_reference
            or (pe is not None and not pe.fused_ok)
            or (bias is not None and self._bias_explicit(q))
        )
        causal_offset = 0 if causal else None
        if explicit:
            mask = _combine_mask(bias, key_padding_mask, causal_offset, q_pos, k_pos, q.dtype)
            out, weights, dropped = attention_reference(q, k, v, mask, dropout_p)
            if pe is not None:
                extra = pe.value_term(dropped, q_pos, k_pos)
                if extra is not None:
                    out = out + extra
        else:
            weights = None
            if bias is None and key_padding_mask is None:
                # is_causal assumes queries and keys start together, true for a full block only
                if causal and q_pos[0] == 0 and q.size(2) == k.size(2):
                    out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
                else:
                    mask = _combine_mask(None, None, causal_offset, q_pos, k_pos, q.dtype)
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
            elif bias is None and not causal:
                keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk) True = attend
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p)
            else:
                mask = _combine_mask(bias, key_padding_mask, causal_offset, q_pos, k_pos, q.dtype)
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        if pe is not None:
            out = pe.mix_output(out, v, q_pos, k_pos, key_padding_mask)
            if need_weights:
                weights = pe.mix_weights(weights, q_pos, k_pos, key_padding_mask)
        return out, weights

    def _bias_explicit(self, q: torch.Tensor) -> bool:
        if self.bias_mode == "auto":
            return q.device.type == "cpu"
        return self.bias_mode == "explicit"
