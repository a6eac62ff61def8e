"""The fused attention paths: SDPA for every case it can take, plus CPU training speed-ups.

``MultiHeadAttention`` (``attention.py``) decides which path a block of queries takes; the
readable reference path lives there. What is here computes the same function faster (tests in
``tests/inference/test_fast_paths.py`` and ``tests/models/test_block_bias.py`` hold each path to
the reference's outputs and gradients):

* ``SDPAWithBlockBias``: a *learned* bias in CPU training (T5, Shaw, Transformer-XL, ALiBi with a
  learned scale), given by the PE in compact form (``AttentionPE.block_bias``: per-offset values,
  Shaw's q·a rows, Transformer-XL's (q + v) and position table). Forward: SDPA's fused kernel per
  utterance; backward written out per block of ~64 query rows, so every T×T-shaped temporary is
  a cache-sized block and the bias gradient is summed per offset from each block. No (B, H, T, T)
  bias, mask or gradient is built: the forward lays out one utterance's (1, H, T, n) bias at a
  time (T5 / ALiBi: one shared (1, H, T, T) layout, kept for the backward), the backward only
  blocks (issue 47; measured in docs/benchmarks.md, "The bias PEs in blocks"). The two paths below remain for
  what it does not take (attention dropout, positions that are not ranges, drawn positions,
  padding that is not a suffix).

* ``attend_fused``: ``F.scaled_dot_product_attention`` for plain attention, for PEs that only
  rotate q/k (RoPE) and for additive biases passed as a float mask (for inference, and for a
  bias without gradient such as ALiBi, SDPA with a float mask measured 2-4x faster than the
  explicit path on CPU, torch 2.14, B = 8, T = 250-1000). A bias meeting a padding mask on CPU is
  attended one utterance at a time over that utterance's keys (``per_utterance_key_counts``), so
  the padding is never folded into a (B, H, Tq, Tk) copy of the bias.
* ``SDPAWithBiasGrad``: a *learned* bias in CPU training. torch's fused kernel gives no gradient
  for the mask and torch then falls back to its unfused math path; this keeps the fused forward
  and writes the backward out. Used above ``FUSED_GRAD_MIN_KEYS`` keys; below it the explicit
  path (scores kept for the backward) is faster.
* ``attend_widened``: a PE that folds its bias into wider q/k (``AttentionPE.fused_qk``:
  Transformer-XL) runs through SDPA with no bias at all, its gradients from SDPA's own backward.
* ``sdpa``: every call above goes through it; on a GPU in half precision it pads a head size that
  is not a multiple of 8, which torch's memory-efficient kernel needs, and a call with a mask
  keeps off cuDNN's kernel while its backward can return NaN (``masked_sdpa_backends``).
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from .attention_masks import combine_mask, hidden_keys, make_pad_mask
from .positional.base import AttentionPE

# Below this many keys, a learned bias on CPU trains faster on the explicit path (scores kept
# for the backward) than through the fused kernel plus a recomputing backward; above it, the
# fused forward wins (measured, torch 2.14, 1 thread, B = 8, H = 4, d = 36: T5 and Transformer-XL
# explicit faster at T = 250 and 500, fused 1.2-1.5x faster at T = 1000).
FUSED_GRAD_MIN_KEYS = 768


# torch's memory-efficient CUDA kernel (the one that takes a mask) needs head sizes that are
# multiples of this in half precision; flash takes no mask at all
HALF_PRECISION_HEAD_MULTIPLE = 8


def head_padding_needed(q: torch.Tensor, v: torch.Tensor) -> bool:
    """On CUDA in half precision (bf16/fp16 tensors, or autocast to them), a q/k or v head size
    that is not a multiple of 8 makes torch skip its fused kernels and run the math path, which
    stores the (B, H, Tq, Tk) probabilities for the backward: measured on an H100, bf16 autocast,
    d = 36, B = 8, T = 4000: 20 GB per training step against 4 GB in fp32 (docs/benchmarks.md)."""
    if not q.is_cuda:
        return False
    half = (torch.float16, torch.bfloat16)
    in_half = q.dtype in half or (torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") in half)
    m = HALF_PRECISION_HEAD_MULTIPLE
    return in_half and (q.size(-1) % m != 0 or v.size(-1) % m != 0)


# cuDNN's SDPA backward returns NaN in grad_q when a mask is passed (any: boolean, float, all-True),
# T % 128 == 64 and a query row's logsumexp is below about -88.7 (pytorch/pytorch#196678, a
# regression since torch 2.11, where cuDNN is the first choice on H100/H200). Fixed by cuDNN 9.26
# (pytorch/pytorch#196861); the pinned torch 2.14.1 ships cuDNN 9.24.0.43, so the fix is not in it.
CUDNN_MASKED_BACKWARD_FIXED = 92600  # torch.backends.cudnn.version() of cuDNN 9.26.0
MASKED_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def masked_sdpa_backends(device_type: str, has_mask: bool, cudnn_version: int | None) -> tuple | None:
    """The SDPA backends a call may choose from; None: torch's own choice among all of them.

    A masked call on CUDA with a cuDNN older than 9.26 may not take cuDNN's kernel (see
    ``CUDNN_MASKED_BACKWARD_FIXED``); the memory-efficient kernel takes the same masks."""
    if device_type != "cuda" or not has_mask:
        return None
    if cudnn_version is not None and cudnn_version >= CUDNN_MASKED_BACKWARD_FIXED:
        return None
    return MASKED_BACKENDS


def sdpa(q, k, v, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
         pad_heads: bool | None = None) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` -> (B, H, Tq, d_v), with q/k/v zero-padded to a head size
    that is a multiple of 8 when ``head_padding_needed`` (``pad_heads``: force it either way).
    Zero columns add nothing to q·k and give zero output columns, which are cut off; the scale
    stays 1/√d of the unpadded q (or ``scale``). A masked call on CUDA keeps to
    ``masked_sdpa_backends``."""
    if pad_heads is None:
        pad_heads = head_padding_needed(q, v)
    backends = masked_sdpa_backends(q.device.type, attn_mask is not None,
                                    torch.backends.cudnn.version() if q.is_cuda else None)
    with sdpa_kernel(list(backends)) if backends else nullcontext():
        if not pad_heads:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                                  is_causal=is_causal, scale=scale)
        m = HALF_PRECISION_HEAD_MULTIPLE
        scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        q, k, v_padded = (F.pad(t, (0, -t.size(-1) % m)) for t in (q, k, v))  # (B, H, T, ⌈d/8⌉·8)
        out = F.scaled_dot_product_attention(q, k, v_padded, attn_mask=attn_mask, dropout_p=dropout_p,
                                             is_causal=is_causal, scale=scale)
    return out[..., :v.size(-1)]  # (B, H, Tq, d_v)


def bias_needs_grad(bias: torch.Tensor | None, q: torch.Tensor, bias_mode: str) -> bool:
    """A learned bias in CPU training: its gradient comes from ``SDPAWithBiasGrad``."""
    return (bias is not None and bias.requires_grad and q.device.type == "cpu" and bias_mode == "auto"
            and torch.is_grad_enabled())


def bias_explicit(bias: torch.Tensor, dropout_p: float, bias_mode: str) -> bool:
    """Whether an additive bias goes through the explicit path rather than a fused one."""
    if bias_mode == "auto":
        # a learned bias on CPU: explicit for short inputs or with dropout (SDPAWithBiasGrad
        # has none; torch's own fallback for a mask needing grad is its unfused math path)
        return (bias.requires_grad and bias.device.type == "cpu"
                and (dropout_p > 0 or bias.size(-1) < FUSED_GRAD_MIN_KEYS))
    return bias_mode == "explicit"


def use_widened_qk(pe: AttentionPE, bias_mode: str, on_cpu: bool, n_keys: int) -> bool:
    """Widened q/k (``AttentionPE.fused_qk``) replace a learned bias when training on CPU:
    SDPA's own backward then gives every gradient, with no bias tensor, no rel_shift and no
    written-out backward (Transformer-XL, B = 8, fwd+bwd: 1.4x faster than the explicit path
    at T = 1000, slower at T <= 500, hence ``FUSED_GRAD_MIN_KEYS``). On CPU SDPA runs its
    math path for these (q/k wider than v), so the (B, H, T, T) probabilities are still
    stored. Inference keeps the bias through SDPA's fused kernel, faster there. The caller
    has already excluded attention weights, the reference path and length remedies."""
    return (bias_mode == "auto" and pe.fused_ok and torch.is_grad_enabled() and on_cpu
            and n_keys >= FUSED_GRAD_MIN_KEYS)


def attend_widened(q, k, v, key_padding_mask, causal, block, q_pos, k_pos, pe, dropout_p):
    """SDPA over widened q (B, H, Tq, d'), k (B, H, Tk, d'), scaled by 1/√d of v's heads,
    in query blocks of ``block`` rows -> (B, H, Tq, d)."""
    scale = 1.0 / math.sqrt(v.size(-1))
    outs = []
    for s in range(0, q.size(2), block):
        e = min(q.size(2), s + block)
        if causal:
            mask = combine_mask(None, key_padding_mask, hidden_keys(q_pos[s:e], k_pos, True, None), q.dtype)
        elif key_padding_mask is not None:
            mask = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk) True = attend
        else:
            mask = None
        o = sdpa(q[:, :, s:e], k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        outs.append(pe.mix_output(o, v, q_pos[s:e], k_pos, key_padding_mask))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)  # (B, H, Tq, d)


def attend_fused(q, k, v, bias, key_padding_mask, hidden, causal, full_block, dropout_p, bias_mode):
    """One block of queries through SDPA -> (B, H, Tq, d).

    q (B, H, Tq, d), k/v (B, H, Tk, d), bias broadcastable to (B, H, Tq, Tk) or None,
    key_padding_mask (B, Tk) True = pad or None, hidden (Tq, Tk) True = a key the query may not
    see or None; ``full_block``: the block's queries and keys start together and have one
    length with no window (SDPA's ``is_causal`` assumes that)."""
    if bias is None and key_padding_mask is None:
        if causal and full_block:
            return sdpa(q, k, v, dropout_p=dropout_p, is_causal=True)
        mask = combine_mask(None, None, hidden, q.dtype)
        return sdpa(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    if bias is None and hidden is None:
        keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk) True = attend
        return sdpa(q, k, v, attn_mask=keep, dropout_p=dropout_p)
    lengths = per_utterance_key_counts(bias, key_padding_mask, q, bias_mode)
    if lengths is not None and min(lengths) == k.size(2):  # a mask that hides nothing
        lengths, key_padding_mask = None, None
    if lengths is None:
        return sdpa_with_bias(q, k, v, bias, key_padding_mask, hidden, dropout_p, bias_mode)
    if bias_needs_grad(bias, q, bias_mode):
        return SDPAWithBiasGrad.apply(q, k, v, bias, None, hidden, 1.0 / math.sqrt(q.size(-1)), lengths)
    # One call per utterance over its own keys: the padding is not folded into a
    # (B, H, Tq, Tk) copy of the (1, H, Tq, Tk) bias (see per_utterance_key_counts).
    return torch.cat([
        sdpa_with_bias(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n],
                       None if bias is None else batch_row(bias, b)[..., :n], None,
                       None if hidden is None else hidden[:, :n], dropout_p, bias_mode)
        for b, n in enumerate(lengths)
    ], dim=0)  # (B, H, Tq, d)


def sdpa_with_bias(q, k, v, bias, key_padding_mask, hidden, dropout_p, bias_mode):
    """SDPA with an additive bias (None allowed) and masks -> (B, H, Tq, d); ``hidden`` (Tq, Tk)
    True = a key the query may not see. A learned bias in CPU training goes through
    ``SDPAWithBiasGrad``."""
    if bias_needs_grad(bias, q, bias_mode):
        return SDPAWithBiasGrad.apply(q, k, v, bias, key_padding_mask, hidden, 1.0 / math.sqrt(q.size(-1)))
    mask = combine_mask(bias, key_padding_mask, hidden, q.dtype)
    return sdpa(q, k, v, attn_mask=mask, dropout_p=dropout_p)


def per_utterance_key_counts(bias, key_padding_mask, q, bias_mode) -> list[int] | None:
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
    if bias is None or key_padding_mask is None or q.device.type != "cpu" or bias_mode != "auto":
        return None
    n_keys = (~key_padding_mask).sum(1)  # (B,)
    if bool((n_keys == 0).any()) or not torch.equal(key_padding_mask, make_pad_mask(n_keys, key_padding_mask.size(1))):
        return None
    return n_keys.tolist()


def batch_row(t: torch.Tensor, b: int) -> torch.Tensor:
    """Utterance b's part of a tensor broadcastable to (B, H, Tq, Tk): a per-utterance one
    (Shaw's q·a) is sliced, a shared one (T5's table; leading size 1) is returned as it is."""
    return t[b:b + 1] if t.dim() == 4 and t.size(0) > 1 else t


def _bias_grad_backward(q, k, v, bias, out, d_out, key_padding_mask, hidden, scale, need_bias):
    """The written-out backward of softmax(QKᵀ·scale + bias + masks)·V (see ``SDPAWithBiasGrad``)
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


class SDPAWithBiasGrad(torch.autograd.Function):
    """softmax(QKᵀ·scale + bias + masks)·V for a bias that needs a gradient (a learned bias).

    Forward: the fused kernel with bias, padding and causal mask combined into one float mask,
    dropped afterwards. Saved for the backward: q, k, v, out and the bias as given (a (1, H,
    Tq, Tk) T5 table, not a (B, H, Tq, Tk) combination with the padding). Backward: written
    out once — S and P = softmax(S) are recomputed, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)),
    then dQ = dS·K·scale, dK = dSᵀ·Q·scale, dV = Pᵀ·dO and d(bias) = dS summed over the
    bias's broadcast dimensions (0 at hidden keys, where P is 0). No dropout (callers use the
    explicit path when dropout is on).

    ``key_lengths`` (suffix padding; see ``per_utterance_key_counts``): utterance b attends to
    its first n_b keys with no padding mask, forward and backward, and every utterance's bias
    gradient goes into one buffer (slicing the bias outside this function would make each
    slice's backward fill a zero gradient the size of the whole bias)."""

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
                                               attn_mask=batch_row(mask, b)[..., :n], scale=scale)
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
                                                 batch_row(bias, b)[..., :n], out[b:b + 1], d_out[b:b + 1], None,
                                                 hid, scale, need_bias)
            d_q[b:b + 1], d_k[b:b + 1, :, :n], d_v[b:b + 1, :, :n] = gq, gk, gv
            if need_bias:
                batch_row(d_bias, b)[..., :n] += gb
        return d_q, d_k, d_v, d_bias, None, None, None, None


# The blocked path's working set: one (1, H, rows, n) fp32 block of scores is about this many
# elements (2**18 = 1 MiB, the machine's L2 per core), so the backward's passes over scores,
# probabilities and score gradients stay in cache. Measured one utterance, H 4, T 1000, d 36,
# 1 thread: 64 rows 103 ms, 128 rows 111 ms, 256 rows 142 ms, 32 rows 163 ms, the whole
# (1, H, T, T) at once (``_bias_grad_backward``) 184-198 ms; torch's fused backward 92-104 ms.
BLOCK_BIAS_ELEMENTS = 2 ** 18
# Keys from which a learned bias takes the blocked path in CPU training (below: the explicit
# path, which keeps the probabilities for its backward and makes one batched call where the
# blocked path makes one per utterance). One layer fwd+bwd, B 8, H 4, d 36, 1 thread, ratio to
# none: T = 100 explicit faster for Shaw (1.60 vs 1.94) and Transformer-XL (1.88 vs 2.01);
# T = 160 about even (T5 1.38 vs 1.42, Shaw 1.90 vs 1.75); T = 250 blocked faster for all
# three (T5 1.35 vs 1.84, Shaw 1.95 vs 2.45, Transformer-XL 2.20 vs 2.42).
BLOCK_BIAS_MIN_KEYS = 160


def block_rows(n_heads: int, n_keys: int) -> int:
    """Query rows per block of ``SDPAWithBlockBias``'s backward (at least 16)."""
    return max(16, BLOCK_BIAS_ELEMENTS // max(1, n_heads * n_keys))


def suffix_key_counts(key_padding_mask, batch: int, n_keys: int) -> list[int] | None:
    """Each utterance's number of real keys when its padding is a suffix (as ``make_pad_mask``
    builds it; all keys without a mask), else None."""
    if key_padding_mask is None:
        return [n_keys] * batch
    n = (~key_padding_mask).sum(1)  # (B,)
    if bool((n == 0).any()) or not torch.equal(key_padding_mask, make_pad_mask(n, key_padding_mask.size(1))):
        return None
    return n.tolist()


def block_bias_for(pe: AttentionPE, q, q_pos, k_pos, key_padding_mask, bias_mode: str, dropout_p: float):
    """The PE's ``BlockBias`` when the blocked path applies: CPU training (grad on, fp32, no
    attention dropout, ``bias_mode="auto"``) of a fused-capable PE with a learned bias, at least
    ``BLOCK_BIAS_MIN_KEYS`` keys and suffix padding; else None (the other paths)."""
    if not (bias_mode == "auto" and q.device.type == "cpu" and torch.is_grad_enabled() and dropout_p == 0
            and q.dtype == torch.float32 and pe.fused_ok and k_pos.numel() >= BLOCK_BIAS_MIN_KEYS):
        return None
    if suffix_key_counts(key_padding_mask, q.size(0), k_pos.numel()) is None:
        return None
    layout = pe.block_bias(q, q_pos, k_pos)
    if layout is None or not any(t.requires_grad for t in layout.inputs):
        return None  # nothing learned (ALiBi): SDPA's own backward serves q, k and v
    return layout


def attend_block_bias(q, k, v, layout, key_padding_mask, hidden) -> torch.Tensor:
    """softmax(QKᵀ/√d + bias + masks)·V with the bias given by a ``BlockBias`` -> (B, H, Tq, d)."""
    lengths = suffix_key_counts(key_padding_mask, q.size(0), k.size(2))
    assert lengths is not None, "attend_block_bias: padding must be a suffix of each utterance"
    return SDPAWithBlockBias.apply(q, k, v, hidden, 1.0 / math.sqrt(q.size(-1)), lengths, layout, *layout.inputs)


def reused(buffers: dict, key: tuple, make) -> torch.Tensor:
    """The buffer of ``key`` (a block's shape), made by ``make`` when the shape changes: blocks of
    one utterance share a shape but its last, so one buffer is kept at a time."""
    buf = buffers.get(key)
    if buf is None:
        buffers.clear()
        buf = buffers[key] = make()
    return buf


class SDPAWithBlockBias(torch.autograd.Function):
    """Attention with a learned bias given in compact form (``positional.base.BlockBias``), CPU
    training.

    Forward, per utterance b over its first n_b keys (no padding mask): the bias (1, H, Tq, n_b)
    laid out by the PE, SDPA's fused kernel. Backward, per utterance and per block of
    ``block_rows`` query rows (one ~1 MiB score block, in cache): S and P = softmax(S)
    recomputed, dV += Pᵀ·dO, dS = P ⊙ (dO·Vᵀ − rowsum(dO ⊙ O)), dQ = dS·K·scale,
    dK += dSᵀ·Q·scale, and the block's dS handed to the layout, which adds it into the gradients
    of its compact tensors (T5's per-offset values, Shaw's q·a rows, Transformer-XL's (q + v) and
    p). Nothing (B, H, Tq, Tk) is built or stored (a shared (1, H, Tq, Tk) layout of T5 / ALiBi
    is kept by the layout between forward and backward); padded keys get zero
    gradients, every query row (padded ones too) sees its utterance's keys, as in the batched
    call. ``hidden`` (Tq, Tk) True = hidden key (causal) or None. No dropout."""

    @staticmethod
    def forward(ctx, q, k, v, hidden, scale, key_lengths, layout, *inputs):
        neg = torch.finfo(q.dtype).min
        H, Tq = q.size(1), q.size(2)
        outs = []
        for b, n in enumerate(key_lengths):
            mask = layout.full(b, n, block_rows(H, n))  # (1, H, Tq, n)
            if hidden is not None:
                mask = mask.masked_fill(hidden[:, :n], neg)
            outs.append(sdpa(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n], attn_mask=mask, scale=scale))
        out = torch.cat(outs, dim=0)  # (B, H, Tq, d)
        ctx.save_for_backward(q, k, v, out, hidden)
        ctx.scale, ctx.key_lengths, ctx.layout = scale, key_lengths, layout
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, hidden = ctx.saved_tensors
        scale, layout = ctx.scale, ctx.layout
        neg = torch.finfo(q.dtype).min
        grads = [torch.zeros_like(t) if need else None for t, need in zip(layout.inputs, ctx.needs_input_grad[7:])]
        d_out = d_out.contiguous()
        d_q, d_k, d_v = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)  # padded keys: 0
        delta = (d_out * out).sum(-1, keepdim=True)  # (B, H, Tq, 1) = rowsum(dP ⊙ P)
        H, Tq = q.size(1), q.size(2)
        rows_buffer = {}  # (block rows, n) -> zeros (H, rows, rows + n − 1), reused: see below
        scores_buffer = {}  # (block rows, n) -> (H, rows, n): a block's bias, then its scores
        for b, n in enumerate(ctx.key_lengths):
            # contiguous once per utterance: q, k, v are head views of the (B, T, H·d) projection
            # (row stride H·d), which each block's GEMMs would otherwise read strided
            kb, vb, qb = k[b, :, :n].contiguous(), v[b, :, :n].contiguous(), q[b].contiguous()  # (H, n | Tq, d)
            kt, vt, kb_scaled = kb.transpose(-2, -1), vb.transpose(-2, -1), kb * scale
            dkb, dvb = kb.new_zeros(kb.shape), vb.new_zeros(vb.shape)  # contiguous: baddbmm_ in one call
            step = block_rows(H, n)
            d_out_b, delta_b, d_q_b = d_out[b], delta[b], d_q[b]  # (H, Tq, d | 1 | d)
            for s in range(0, Tq, step):
                e = min(Tq, s + step)
                qs, dos = qb[:, s:e], d_out_b[:, s:e]  # (H, e − s, d)
                # the bias written into a reused buffer, then + scale·q·kᵀ in place in one GEMM
                # (beta = 1): no separate scale and add passes over the block, no new block per
                # GEMM; Shaw's layout, built per block, spent 0.2 s of a T = 1000 layer's 1.5 s in them
                scores = reused(scores_buffer, (e - s, n), lambda: q.new_empty(H, e - s, n))
                layout.write_block(scores.unsqueeze(0), b, s, e, n)
                scores.baddbmm_(qs, kt, alpha=scale)  # (H, e − s, n)
                if hidden is not None:
                    scores.masked_fill_(hidden[s:e, :n], neg)
                p = torch.softmax(scores, dim=-1)  # (H, e − s, n)
                del scores
                dvb.baddbmm_(p.transpose(-2, -1), dos)
                # dS is written straight into the offset-rows layout of its gradient (the view
                # ``offset_rows`` would copy it into), so the layout reads it there with no zero-fill
                # and no copy per block; the zeros outside the view are never written
                width = (e - s) + n - 1
                rows = reused(rows_buffer, (e - s, n), lambda: q.new_zeros(H, e - s, width))
                d_s = rows.as_strided((H, e - s, n), (rows.stride(0), width - 1, 1), e - s - 1)
                torch.bmm(dos, vt, out=d_s)
                d_s.sub_(delta_b[:, s:e]).mul_(p)  # (H, e − s, n)
                torch.bmm(d_s, kb_scaled, out=d_q_b[:, s:e])
                dkb.baddbmm_(d_s.transpose(-2, -1), qs, alpha=scale)
                layout.add_block_grad(grads, b, s, e, n, d_s.unsqueeze(0), rows.unsqueeze(0))
            d_k[b, :, :n], d_v[b, :, :n] = dkb, dvb
        return (d_q, d_k, d_v, None, None, None, None, *grads)
