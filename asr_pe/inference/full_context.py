"""Full-context encoding of very long inputs: one forward pass over a whole recording.

``encode_full(model, features, lengths, block_size="auto")`` gives the same output as
``model.encode(features, lengths)`` (to float tolerance) with memory linear in the length:

* the convolutional front end runs in time chunks that overlap by its receptive field
  (``frontend_in_chunks``), so a 60-minute input never holds the first conv layer's
  activations for the whole recording at once (Conv2d 4x, d = 144: 4 GiB for 60 min);
* attention runs in query blocks (``Encoder.set_block_size``): each block's scores are
  (B, H, block, T) and every PE generates its bias, relative term or REM kernel for the block
  from positions, so no T × T matrix exists. ``block_size="auto"`` picks the block so that
  one such tensor takes about ``budget_mb`` MiB.

Everything else in the encoder (FFN, conv module, norms) is per frame or a short
convolution, so its memory is already linear in T. Time stays quadratic in T for
full-context attention: 60 minutes at 40 ms is 90,000 frames, 8.1·10⁹ score entries per head
and layer.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from asr_pe.models.attention import make_pad_mask

DEFAULT_BUDGET_MB = 128.0
# on a GPU: this share of its memory per score block (2.5 GB on an 80 GB card). 128 MiB blocks
# cut a 60-minute recording (90,000 frames) into ~970 blocks of 93 rows per layer, which left an
# H100 idle between kernel launches: 55 s for `none` (docs/benchmarks.md)
GPU_BUDGET_SHARE = 1 / 32


def default_budget_mb(device: torch.device | str) -> float:
    """MiB per (batch, H, block, n_keys) fp32 score tensor: ``DEFAULT_BUDGET_MB`` on a CPU,
    ``GPU_BUDGET_SHARE`` of the card's memory on a GPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return DEFAULT_BUDGET_MB
    total = torch.cuda.get_device_properties(device).total_memory
    return max(DEFAULT_BUDGET_MB, total * GPU_BUDGET_SHARE / 2**20)
DEFAULT_FRONTEND_CHUNK = 1500  # encoder frames per front-end chunk (60 s at 40 ms)


def auto_block_size(
    n_keys: int, n_heads: int, batch: int = 1, budget_mb: float = DEFAULT_BUDGET_MB,
    min_block: int = 16, max_block: int = 4096,
) -> int | None:
    """Query rows per attention block so that one (batch, H, block, n_keys) fp32 tensor takes
    about ``budget_mb`` MiB; None when the whole sequence fits in one block."""
    rows = int(budget_mb * 2**20 // (4 * max(1, batch) * n_heads * max(1, n_keys)))
    block = max(min_block, min(max_block, rows))
    return None if block >= n_keys else block


def _receptive_field(frontend: nn.Module) -> tuple[int, int] | None:
    """(stride S, receptive field R) of a front end whose output frame t reads input frames
    [S·t, S·t + R), or None if the front end does not declare them consistently."""
    S = getattr(frontend, "factor", None)
    if S is None or not all(hasattr(frontend, a) for a in ("min_input_frames", "output_lengths", "subsample")):
        return None
    S, R = int(S), int(frontend.min_input_frames())
    probe = torch.tensor([R, S + R, 5 * S + R + S - 1])
    if frontend.output_lengths(probe).tolist() != [1, 2, 6]:
        return None  # not a plain strided stack: chunking would not be exact
    return S, R


def frontend_in_chunks(
    frontend: nn.Module, features: torch.Tensor, lengths: torch.Tensor,
    chunk_frames: int = DEFAULT_FRONTEND_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The front end's output (B, T', D), lengths', computed ``chunk_frames`` output frames at a time.

    Output frame t of a strided conv stack (total stride S, receptive field R) reads input
    frames [S·t, S·t + R). Output frames [a, b) therefore come from input frames
    [S·a, S·(b − 1) + R): chunks overlap by R − S input frames and start on multiples of S, so
    every chunk sees exactly the windows of the whole-input pass. Padded frames are zeroed
    once for the whole input, as the front end itself does, so padding behaves identically.
    The front end's optional context conv (``context_kernel``) runs once on the joined output:
    it is a short convolution over (B, T', D), linear in T.
    """
    B, T, _ = features.shape
    rf = _receptive_field(frontend)
    total = int(frontend.output_lengths(torch.tensor([T]))[0]) if rf is not None else 0
    if rf is None or total <= chunk_frames:
        return frontend(features, lengths)
    S, R = rf
    x = features.masked_fill(make_pad_mask(lengths.to(features.device), T)[..., None], 0.0)
    outs = []
    for a in range(0, total, chunk_frames):
        b = min(total, a + chunk_frames)
        piece = x[:, S * a: S * (b - 1) + R]  # (B, S·(b − a − 1) + R, F)
        full = torch.full((B,), piece.size(1), dtype=lengths.dtype, device=lengths.device)
        y, _ = frontend.subsample(piece, full)  # (B, b − a, D)
        assert y.size(1) == b - a, f"front-end chunk [{a}, {b}) gave {y.size(1)} frames"
        outs.append(y)
    y, out_lengths = torch.cat(outs, dim=1), frontend.output_lengths(lengths)  # (B, T', D)
    context = getattr(frontend, "context", None)
    return (y if context is None else context(y, out_lengths)), out_lengths


def _block_sizes(encoder: nn.Module) -> list[Any]:
    return [layer.attn.block_size for layer in encoder.layers]


def _restore_block_sizes(encoder: nn.Module, sizes: list[Any]) -> None:
    for layer, size in zip(encoder.layers, sizes):
        layer.attn.block_size = size


def resolve_block_size(block_size: int | str | None, n_frames: int, n_heads: int, batch: int = 1,
                       budget_mb: float = DEFAULT_BUDGET_MB) -> int | None:
    """``"auto"`` -> ``auto_block_size``; an int >= 1 as is; None/0 -> unblocked."""
    if block_size in (None, 0, "none", "null"):
        return None
    if block_size == "auto":
        return auto_block_size(n_frames, n_heads, batch, budget_mb)
    try:
        block = int(block_size)
    except (TypeError, ValueError):
        raise ValueError(f"block_size must be a positive int, 'auto' or null, got {block_size!r}") from None
    if block < 1:
        raise ValueError(f"block_size must be >= 1, got {block}")
    return block


def encode_full(
    model: nn.Module,
    features: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int | str | None = "auto",
    budget_mb: float | None = None,
    frontend_chunk: int = DEFAULT_FRONTEND_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-context encoding: features (B, T, F) at 10 ms -> enc (B, T', D), enc_lengths (B,).

    Same result as ``model.encode`` (an ``ASRModel``: ``.frontend`` then ``.encoder``); the
    encoder's block size is set for this call only and restored afterwards. ``budget_mb``
    (for ``block_size="auto"``): None = ``default_budget_mb`` of the features' device."""
    x, enc_lengths = frontend_in_chunks(model.frontend, features, lengths, frontend_chunk)
    encoder = model.encoder
    n_heads = encoder.layers[0].attn.n_heads
    budget_mb = default_budget_mb(features.device) if budget_mb is None else budget_mb
    block = resolve_block_size(block_size, x.size(1), n_heads, x.size(0), budget_mb)
    saved = _block_sizes(encoder)
    try:
        encoder.set_block_size(block)
        return encoder(x, enc_lengths)
    finally:
        _restore_block_sizes(encoder, saved)


def attention_bytes_per_block(n_keys: int, n_heads: int, block: int, batch: int = 1) -> int:
    """Size of one (batch, H, block, n_keys) fp32 score tensor (for estimates and logs)."""
    return 4 * batch * n_heads * block * n_keys


def estimate_attention_flops(n_frames: int, d_model: int, n_layers: int) -> float:
    """Multiply-adds ×2 of QKᵀ and weights·V over all heads and layers: 4·T²·D·L."""
    return 4.0 * n_frames * n_frames * d_model * n_layers


__all__ = [
    "DEFAULT_BUDGET_MB",
    "DEFAULT_FRONTEND_CHUNK",
    "attention_bytes_per_block",
    "auto_block_size",
    "default_budget_mb",
    "encode_full",
    "estimate_attention_flops",
    "frontend_in_chunks",
    "resolve_block_size",
]
