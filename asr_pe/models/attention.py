"""The one multi-head attention used by every encoder and decoder, and its readable path.

``MultiHeadAttention`` picks a path per block of query rows; all give the same result to float
tolerance (tests hold them to it):

* reference: softmax(QKᵀ/√d + bias)·V written out (``attention_reference``), used for
  attention weights (``need_weights``) and by tests (``use_reference``): read this first;
* explicit: the same with scale, bias and masks applied in place (``attention_explicit``), for
  short learned biases the blocked path does not take, attention dropout on a learned bias, for
  PEs that need the weights (``fused_ok = False``) and for every bias when ``bias_mode="explicit"``;
* fused: SDPA; for CPU training a learned bias the PE offers in compact form
  (``AttentionPE.block_bias``) is attended by ``SDPAWithBlockBias`` (fused forward, backward in
  cache-sized blocks of query rows, no T×T bias), other learned biases with a written-out
  backward or Transformer-XL as widened q/k: ``attention_fast_paths.py`` (why and when each is
  faster is written there);
* flex: on CUDA, a bias the PE offers in compact form through FlexAttention (its ``score_mod``),
  padding, causality and the window remedy as a block mask (``attention_flex.py``);
* blocked: any of the above over query blocks of ``block_size`` rows, so a long input never
  materialises a T×T matrix. PE hooks receive the query/key positions of the block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import attention_fast_paths as fast
from . import attention_flex as flex
from .attention_masks import combine_mask, hidden_keys, make_pad_mask
from .positional.base import AttentionPE

__all__ = ["MultiHeadAttention", "attention_explicit", "attention_reference", "hidden_keys", "make_pad_mask"]


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


def attention_explicit(q, k, v, bias, key_padding_mask, hidden, dropout_p=0.0):
    """Fast explicit attention: as ``attention_reference`` with the mask parts applied in place.

    The scale goes on q (a pass over (B, H, Tq, d), not over the scores); bias, padding and
    causal mask are added / filled into the score tensor in place (no combined mask is built).
    q (B, H, Tq, d), k/v (B, H, Tk, d), bias broadcastable to (B, H, Tq, Tk) or None,
    key_padding_mask (B, Tk) True = pad or None, hidden (Tq, Tk) True = a key the query may not see
    (``hidden_keys``) or None
    -> out (B, H, Tq, d), weights, weights after dropout."""
    scores = torch.matmul(q * (1.0 / math.sqrt(q.size(-1))), k.transpose(-2, -1))  # (B, H, Tq, Tk)
    neg = torch.finfo(scores.dtype).min
    if bias is not None:
        scores = scores.add_(bias)
    if key_padding_mask is not None:
        scores = scores.masked_fill_(key_padding_mask[:, None, None, :], neg)
    if hidden is not None:
        scores = scores.masked_fill_(hidden, neg)
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
        assert bias_mode in ("auto", "sdpa", "explicit", "flex"), f"bad bias_mode {bias_mode!r}"
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.bias_mode = bias_mode
        # Inputs with more query rows than this are computed in blocks (None: never).
        self.block_size = block_size
        self.use_reference = False  # tests flip this to force the explicit path
        # Inference remedies for inputs longer than training (asr_pe/inference/remedies.py),
        # off by default: ``window`` hides keys more than this many frames from the query;
        # ``logit_scale_keys`` = T_train multiplies every logit by max(1, ln n / ln T_train),
        # n the utterance's number of keys (a length-aware softmax temperature).
        self.window: int | None = None
        self.logit_scale_keys: int | None = None

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
        block = self.block_size if (self.block_size and Tq > self.block_size and not need_weights) else Tq
        if self.window is not None and not need_weights:
            # windowed: a block of rows [s, e) needs keys [s − W, e + W) only (see _key_span)
            block = min(block, max(self.window, 32))
        out = self._attend_flex(q, k, v, q_pos, k_pos, key_padding_mask, pe, kv is not None, causal,
                                need_weights, blocked=bool(self.block_size and Tq > self.block_size))
        if out is not None:
            return self.out_proj(out.transpose(1, 2).reshape(B, Tq, D)), None  # (B, Tq, D)
        remedies = self.window is not None or self.logit_scale_keys is not None
        plain_call = pe is not None and not remedies and not need_weights and not self.use_reference
        # a learned bias in CPU training: the PE's compact bias, attended in cache-sized blocks
        layout = (fast.block_bias_for(pe, q, q_pos, k_pos, key_padding_mask, self.bias_mode,
                                      self.dropout if self.training else 0.0)
                  if plain_call and block == Tq else None)
        if (plain_call and layout is None
                and fast.use_widened_qk(pe, self.bias_mode, self.in_proj.weight.device.type == "cpu", Tk)):
            widened = pe.fused_qk(q, k, q_pos, k_pos)
            if widened is not None:  # the PE's whole logit as one dot product: SDPA, no bias
                dropout_p = self.dropout if self.training else 0.0
                out = fast.attend_widened(*widened, v, key_padding_mask, causal, block, q_pos, k_pos, pe, dropout_p)
                return self.out_proj(out.transpose(1, 2).reshape(B, Tq, D)), None  # (B, Tq, D)
        q_raw = q
        if pe is not None:
            q, k = pe.transform_qk(q, k, q_pos, k_pos)
        if layout is not None:
            out = fast.attend_block_bias(q, k, v, layout, key_padding_mask, hidden_keys(q_pos, k_pos, causal, None))
            out = pe.mix_output(out, v, q_pos, k_pos, key_padding_mask)
            return self.out_proj(out.transpose(1, 2).reshape(B, Tq, D)), None  # (B, Tq, D)
        temperature = self._length_temperature(key_padding_mask, Tk, q)
        if temperature is not None:
            q = q * temperature  # the content logits; attend_block scales a PE's bias alike

        outs, weights = [], []
        for s in range(0, Tq, block):
            e = min(Tq, s + block)
            ks, ke = self._key_span(s, e, Tk, need_weights)
            o, w_ = self.attend_block(
                q[:, :, s:e], q_raw[:, :, s:e], k[:, :, ks:ke], v[:, :, ks:ke], q_pos[s:e], k_pos[ks:ke],
                None if key_padding_mask is None else key_padding_mask[:, ks:ke], pe, causal, need_weights,
                temperature=temperature,
            )
            outs.append(o)
            weights.append(w_)
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)  # (B, H, Tq, d)
        out = out.transpose(1, 2).reshape(B, Tq, D)  # (B, Tq, D)
        return self.out_proj(out), (weights[0] if need_weights else None)

    def _attend_flex(self, q, k, v, q_pos, k_pos, key_padding_mask, pe, cross, causal, need_weights, blocked):
        """The flex path (``attention_flex.py``) when it applies: a PE offering its bias in compact
        form, no weights asked for, no length temperature, not blocked, no attention dropout; the
        window remedy becomes part of the block mask. -> (B, H, Tq, d) or None (other paths)."""
        dropout_p = self.dropout if self.training else 0.0
        if (pe is None or cross or need_weights or self.use_reference or not pe.fused_ok or blocked
                or self.logit_scale_keys is not None
                or not flex.may_use_flex(self.bias_mode, q.device.type, dropout_p)):
            return None
        layout = pe.block_bias(q, q_pos, k_pos)  # from the untransformed q, as logits_bias
        if not flex.use_flex(self.bias_mode, q.device.type, dropout_p, layout, q.size(-1), k.size(2)):
            return None
        q, k = pe.transform_qk(q, k, q_pos, k_pos)
        out = flex.attend_flex(q, k, v, layout, key_padding_mask, causal, self.window)
        return pe.mix_output(out, v, q_pos, k_pos, key_padding_mask)

    def _key_span(self, s: int, e: int, n_keys: int, need_weights: bool) -> tuple[int, int]:
        """The keys query rows [s, e) may see: all of them, or with a window W the keys
        [s − W, e + W) (self-attention: query and key positions are the same frames)."""
        if self.window is None or need_weights:
            return 0, n_keys
        return max(0, s - self.window), min(n_keys, e + self.window)

    def _length_temperature(self, key_padding_mask, n_keys: int, q: torch.Tensor) -> torch.Tensor | None:
        """(B, 1, 1, 1) factors max(1, ln n_b / ln T_train), n_b utterance b's number of real
        keys, or None when logit scaling is off. 1 up to the training length: a model is left
        as trained on inputs it has seen."""
        if self.logit_scale_keys is None:
            return None
        if key_padding_mask is None:
            n = torch.full((q.size(0),), n_keys, device=q.device)
        else:
            n = (~key_padding_mask).sum(1)  # (B,)
        t = n.clamp_min(1).float().log() / math.log(max(int(self.logit_scale_keys), 2))
        return t.clamp_min(1.0).to(q.dtype)[:, None, None, None]  # (B, 1, 1, 1)

    def attend_block(self, q, q_raw, k, v, q_pos, k_pos, key_padding_mask, pe, causal, need_weights,
                     temperature=None):
        """Attention for one block of query rows. Returns out (B, H, Tb, d), weights or None.
        ``temperature`` (B, 1, 1, 1): the factor ``q`` is already scaled by, applied to a bias here."""
        dropout_p = self.dropout if self.training else 0.0
        bias = pe.logits_bias(q_raw, q_pos, k_pos) if pe is not None else None
        if bias is not None and temperature is not None:
            bias = bias * temperature  # (B, H, Tq, Tk): the whole logit scaled, not just q·k
        hidden = hidden_keys(q_pos, k_pos, causal, self.window)  # (Tq, Tk) or None
        explicit = (
            need_weights
            or self.use_reference
            or (pe is not None and not pe.fused_ok)
            or (bias is not None and fast.bias_explicit(bias, dropout_p, self.bias_mode))
        )
        weights = None
        if explicit:
            if need_weights or self.use_reference:
                mask = combine_mask(bias, key_padding_mask, hidden, q.dtype)
                out, weights, dropped = attention_reference(q, k, v, mask, dropout_p)
            else:
                out, weights, dropped = attention_explicit(q, k, v, bias, key_padding_mask, hidden, dropout_p)
            # the value step: a PE's term on the (dropped) weights, e.g. Shaw's relative values
            extra = pe.value_term(dropped, q_pos, k_pos) if pe is not None else None
            if extra is not None:
                out = out + extra
        else:
            full_block = self.window is None and bool(q_pos[0] == 0) and q.size(2) == k.size(2)
            out = fast.attend_fused(q, k, v, bias, key_padding_mask, hidden, causal, full_block, dropout_p,
                                    self.bias_mode)
        if pe is not None:
            out = pe.mix_output(out, v, q_pos, k_pos, key_padding_mask)
            if need_weights:
                weights = pe.mix_weights(weights, q_pos, k_pos, key_padding_mask)
        return out, weights
