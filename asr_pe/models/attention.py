"""The one multi-head attention used by every encoder and decoder.

Paths (all give the same result to float tolerance; tests hold them to it):

* fused: ``F.scaled_dot_product_attention`` for plain attention, for PEs that only rotate
  q/k (RoPE) and, by default (``bias_mode="auto"``), for additive biases passed as a float
  mask (for inference, and for a bias without gradient such as ALiBi, SDPA with a float
  mask measured 2-4x faster than the explicit path on CPU, torch 2.14, B = 8, T = 250-1000).
  A *learned* bias in training on CPU is the hard case: torch's fused kernel gives no
  gradient for the mask and torch then falls back to its unfused math path. Above
  ``FUSED_GRAD_MIN_KEYS`` keys, ``_SDPAWithBiasGrad`` keeps the fused forward and writes the
  backward out, and a PE that can fold its bias into wider q/k (``AttentionPE.fused_qk``:
  Transformer-XL) runs through SDPA with no bias at all (on CPU that is torch's math path:
  the fused CPU kernel needs q, k and v of one width; padding v to it measured slower); below
  it the explicit path is faster (its scores are kept for the backward). A bias meeting a
  padding mask on CPU is attended one utterance at a time over that utterance's keys, so the
  padding is never folded into a (B, H, Tq, Tk) copy of the bias (``_per_utterance_keys``);
* explicit: softmax(QKᵀ/√d + bias)·V written out (``attention_explicit``: scale on q, bias
  and masks applied in place) for short learned biases, with attention dropout on a learned
  bias, for PEs that need the weights (``fused_ok = False``) and for every bias when
  ``bias_mode="explicit"``; ``attention_reference`` is the readable version, used for
  attention weights (``need_weights``) and by tests (``use_reference``);
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


# Below this many keys, a learned bias on CPU trains faster on the explicit path (scores kept
# for the backward) than through the fused kernel plus a recomputing backward; above it, the
# fused forward wins (measured, torch 2.14, 1 thread, B = 8, H = 4, d = 36: T5 and Transformer-XL
# explicit faster at T = 250 and 500, fused 1.2-1.5x faster at T = 1000).
FUSED_GRAD_MIN_KEYS = 768


def _bias_grad_backward(q, k, v, bias, out, d_out, key_padding_mask, hidden, scale, need_bias):
    """The written-out backward of softmax(QKᵀ·scale + bias + masks)·V (see ``_SDPAWithBiasGrad``)
    -> d_q, d_k, d_v, d_bias (None unless ``need_bias``; shaped like ``bias``)."""
    scores = torch.matmul(q, k.transpose(-2, -1)).mul_(scale).add_(bias)  # (B, H, Tq, Tk)
    if key_padding_mask is not None:
        scores.masked_fill_(key_padding_mask[:, None, None, :], torch.finfo(scores.dtype).min)
    if hidden is not None:
        scores.masked_fill_(hidden, torch.finfo(scores.dtype).min)
    p = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    del scores
    d_v = torch.matmul(p.transpose(-2, -1), d_out)  # (B, H, Tk, d)
    delta = (d_out * out).sum(-1, keepdim=True)  # (B, H, Tq, 1) = rowsum(dP ⊙ P)
    d_s = torch.matmul(d_out, v.transpose(-2, -1)).sub_(delta).mul_(p)  # (B, H, Tq, Tk)
    del p
    d_q = torch.matmul(d_s, k).mul_(scale)
    d_k = torch.matmul(d_s.transpose(-2, -1), q).mul_(scale)
    d_bias = None
    if need_bias:
        lead = d_s.dim() - bias.dim()  # a bias of fewer dims broadcasts over the leading ones
        dims = list(range(lead)) + [lead + i for i, m in enumerate(bias.shape) if m == 1 and d_s.size(lead + i) != 1]
        d_bias = d_s.sum(dim=dims, keepdim=True) if dims else d_s
        d_bias = d_bias.reshape(bias.shape)
    return d_q, d_k, d_v, d_bias


class _SDPAWithBiasGrad(torch.autograd.Function):
    """softmax(QKᵀ·scale + bias + masks)·V for a bias that needs a gradient (a learned bias).

    Forward: the fused kernel with bias, padding and causal mask combined into one float mask,
    dropped afterwards. Saved for the backward: q, k, v, out and the bias as given (a (1, H,
    Tq, Tk) T5 table, not a (B, H, Tq, Tk) combination with the padding). Backward: written
    out once — S and P = softmax(S) are recomputed, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)),
    then dQ = dS·K·scale, dK = dSᵀ·Q·scale, dV = Pᵀ·dO and d(bias) = dS summed over the
    bias's broadcast dimensions (0 at hidden keys, where P is 0). No dropout (callers use the
    explicit path when dropout is on).

    ``key_lengths`` (suffix padding; see ``MultiHeadAttention._per_utterance_keys``): utterance
    b attends to its first n_b keys with no padding mask, forward and backward, and every
    utterance's bias gradient goes into one buffer (slicing the bias outside this function
    would make each slice's backward fill a zero gradient the size of the whole bias)."""

    @staticmethod
    def forward(ctx, q, k, v, bias, key_padding_mask, hidden, scale, key_lengths=None):
        neg = torch.finfo(q.dtype).min
        mask = bias.detach()
        if hidden is not None:
            mask = mask.masked_fill(hidden, neg)
        # detached: torch picks its unfused math kernel for a mask that requires grad, even here
        qd, kd, vd = q.detach(), k.detach(), v.detach()
        if key_lengths is None:
            if key_padding_mask is not None:
                mask = mask.masked_fill(key_padding_mask[:, None, None, :], neg)
            out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, scale=scale)
        else:
            assert key_padding_mask is None, "key_lengths replace the padding mask"
            out = torch.cat([
                F.scaled_dot_product_attention(qd[b:b + 1], kd[b:b + 1, :, :n], vd[b:b + 1, :, :n],
                                               attn_mask=_batch_row(mask, b)[..., :n], scale=scale)
                for b, n in enumerate(key_lengths)
            ], dim=0)  # (B, H, Tq, d)
        ctx.save_for_backward(q, k, v, bias, out, key_padding_mask, hidden)
        ctx.scale, ctx.key_lengths = scale, key_lengths
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, bias, out, key_padding_mask, hidden = ctx.saved_tensors
        scale, need_bias = ctx.scale, ctx.needs_input_grad[3]
        if ctx.key_lengths is None:
            d_q, d_k, d_v, d_bias = _bias_grad_backward(q, k, v, bias, out, d_out, key_padding_mask, hidden,
                                                        scale, need_bias)
            return d_q, d_k, d_v, d_bias, None, None, None, None
        d_q, d_k, d_v = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)  # padded keys: 0
        d_bias = torch.zeros_like(bias) if need_bias else None
        for b, n in enumerate(ctx.key_lengths):
            hid = None if hidden is None else hidden[:, :n]
            gq, gk, gv, gb = _bias_grad_backward(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n],
                                                 _batch_row(bias, b)[..., :n], out[b:b + 1], d_out[b:b + 1], None,
                                                 hid, scale, need_bias)
            d_q[b:b + 1], d_k[b:b + 1, :, :n], d_v[b:b + 1, :, :n] = gq, gk, gv
            if need_bias:
                _batch_row(d_bias, b)[..., :n] += gb
        return d_q, d_k, d_v, d_bias, None, None, None, None


def _batch_row(t: torch.Tensor, b: int) -> torch.Tensor:
    """Utterance b's part of a tensor broadcastable to (B, H, Tq, Tk): a per-utterance one
    (Shaw's q·a) is sliced, a shared one (T5's table; leading size 1) is returned as it is."""
    return t[b:b + 1] if t.dim() == 4 and t.size(0) > 1 else t


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
        remedies = self.window is not None or self.logit_scale_keys is not None
        if pe is not None and not remedies and self._try_fused_qk(pe, need_weights, k.size(2)):
            widened = pe.fused_qk(q, k, q_pos, k_pos)
            if widened is not None:  # the PE's whole logit as one dot product: SDPA, no bias
                out = self._attend_widened(*widened, v, key_padding_mask, causal, block, q_pos, k_pos, pe)
                return self.out_proj(out.transpose(1, 2).reshape(B, Tq, D)), None  # (B, Tq, D)
        q_raw = q
        if pe is not None:
            q, k = pe.transform_qk(q, k, q_pos, k_pos)
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
            or (bias is not None and self._bias_explicit(bias, dropout_p))
        )
        if explicit and not (need_weights or self.use_reference):
            out, weights, dropped = attention_explicit(q, k, v, bias, key_padding_mask, hidden, dropout_p)
            if pe is not None:
                extra = pe.value_term(dropped, q_pos, k_pos)
                if extra is not None:
                    out = out + extra
        elif explicit:
            mask = _combine_mask(bias, key_padding_mask, hidden, q.dtype)
            out, weights, dropped = attention_reference(q, k, v, mask, dropout_p)
            if pe is not None:
                extra = pe.value_term(dropped, q_pos, k_pos)
                if extra is not None:
                    out = out + extra
        else:
            weights = None
            if bias is None and key_padding_mask is None:
                # is_causal assumes queries and keys start together, true for a full block only
                if causal and self.window is None and q_pos[0] == 0 and q.size(2) == k.size(2):
                    out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
                else:
                    mask = _combine_mask(None, None, hidden, q.dtype)
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
            elif bias is None and hidden is None:
                keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk) True = attend
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p)
            else:
                lengths = self._per_utterance_keys(bias, key_padding_mask, q)
                if lengths is not None and min(lengths) == k.size(2):  # a mask that hides nothing
                    lengths, key_padding_mask = None, None
                if lengths is None:
                    out = self._sdpa_with_bias(q, k, v, bias, key_padding_mask, hidden, dropout_p)
                elif self._bias_needs_grad(bias, q):
                    out = _SDPAWithBiasGrad.apply(q, k, v, bias, None, hidden, 1.0 / math.sqrt(q.size(-1)), lengths)
                else:
                    # One call per utterance over its own keys: the padding is not folded into a
                    # (B, H, Tq, Tk) copy of the (1, H, Tq, Tk) bias (see _per_utterance_keys).
                    out = torch.cat([
                        self._sdpa_with_bias(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n],
                                             None if bias is None else _batch_row(bias, b)[..., :n], None,
                                             None if hidden is None else hidden[:, :n], dropout_p)
                        for b, n in enumerate(lengths)
                    ], dim=0)  # (B, H, Tq, d)
        if pe is not None:
            out = pe.mix_output(out, v, q_pos, k_pos, key_padding_mask)
            if need_weights:
                weights = pe.mix_weights(weights, q_pos, k_pos, key_padding_mask)
        return out, weights

    def _sdpa_with_bias(self, q, k, v, bias, key_padding_mask, hidden, dropout_p):
        """SDPA with an additive bias (None allowed) and masks -> (B, H, Tq, d); ``hidden`` (Tq, Tk)
        True = a key the query may not see. A learned bias in CPU training goes through
        ``_SDPAWithBiasGrad``."""
        if self._bias_needs_grad(bias, q):
            return _SDPAWithBiasGrad.apply(q, k, v, bias, key_padding_mask, hidden, 1.0 / math.sqrt(q.size(-1)))
        mask = _combine_mask(bias, key_padding_mask, hidden, q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)

    def _bias_needs_grad(self, bias, q) -> bool:
        """A learned bias in CPU training: its gradient comes from ``_SDPAWithBiasGrad``."""
        return (bias is not None and bias.requires_grad and q.device.type == "cpu" and self.bias_mode == "auto"
                and torch.is_grad_enabled())

    def _per_utterance_keys(self, bias, key_padding_mask, q) -> list[int] | None:
        """The number of real keys of each utterance when a bias and a padding mask meet on CPU
        and every utterance's padding is a suffix (as ``make_pad_mask`` builds); else None.

        Why: folding the padding into a bias makes a (B, H, Tq, Tk) copy per layer (of a
        (1, H, Tq, Tk) one for T5/ALiBi), which the fused kernel then reads in forward and
        backward. One SDPA call per utterance over its first n keys needs no padding mask, the
        bias slice is a view, and a learned bias's written-out backward works on one
        utterance's (1, H, Tq, n) tensors at a time instead of the batch's.
        Measured (torch 2.14, 1 thread, B 8, H 4, T 1000, d 36, lengths 1000…750, fwd+bwd of one
        call): 340-348 ms with the folded mask, 239-262 ms per utterance, 252-264 ms for SDPA
        with the padding alone (no bias). Every query row (padded ones too) attends to the same
        keys as in the batched call, so the outputs are the same."""
        if bias is None or key_padding_mask is None or q.device.type != "cpu" or self.bias_mode != "auto":
            return None
        n_keys = (~key_padding_mask).sum(1)  # (B,)
        if bool((n_keys == 0).any()) or not torch.equal(key_padding_mask, make_pad_mask(n_keys, key_padding_mask.size(1))):
            return None
        return n_keys.tolist()

    def _try_fused_qk(self, pe: AttentionPE, need_weights: bool, n_keys: int) -> bool:
        """Widened q/k (``AttentionPE.fused_qk``) replace a learned bias when training on CPU:
        SDPA's own backward then gives every gradient, with no bias tensor, no rel_shift and no
        written-out backward (Transformer-XL, B = 8, fwd+bwd: 1.4x faster than the explicit path
        at T = 1000, slower at T <= 500, hence ``FUSED_GRAD_MIN_KEYS``). On CPU SDPA runs its
        math path for these (q/k wider than v), so the (B, H, T, T) probabilities are still
        stored. Inference keeps the bias through SDPA's fused kernel, faster there."""
        return (self.bias_mode == "auto" and not need_weights and not self.use_reference and pe.fused_ok
                and torch.is_grad_enabled() and self.in_proj.weight.device.type == "cpu"
                and n_keys >= FUSED_GRAD_MIN_KEYS)

    def _attend_widened(self, q, k, v, key_padding_mask, causal, block, q_pos, k_pos, pe):
        """SDPA over widened q (B, H, Tq, d'), k (B, H, Tk, d'), scaled by 1/√d of v's heads."""
        dropout_p = self.dropout if self.training else 0.0
        scale = 1.0 / math.sqrt(v.size(-1))
        outs = []
        for s in range(0, q.size(2), block):
            e = min(q.size(2), s + block)
            if causal:
                mask = _combine_mask(None, key_padding_mask, hidden_keys(q_pos[s:e], k_pos, True, None), q.dtype)
            elif key_padding_mask is not None:
                mask = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk) True = attend
            else:
                mask = None
            o = F.scaled_dot_product_attention(q[:, :, s:e], k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
            outs.append(pe.mix_output(o, v, q_pos[s:e], k_pos, key_padding_mask))
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)  # (B, H, Tq, d)

    def _bias_explicit(self, bias: torch.Tensor, dropout_p: float) -> bool:
        """Whether an additive bias goes through the explicit path (see the module docstring)."""
        if self.bias_mode == "auto":
            # a learned bias on CPU: explicit for short inputs or with dropout (_SDPAWithBiasGrad
            # has none; torch's own fallback for a mask needing grad is its unfused math path)
            return (bias.requires_grad and bias.device.type == "cpu"
                    and (dropout_p > 0 or bias.size(-1) < FUSED_GRAD_MIN_KEYS))
        return self.bias_mode == "explicit"
