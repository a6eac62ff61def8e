"""Chunked encoding with overlap: the practical alternative to full-context inference.

Long recordings are cut into chunks of ``chunk_s`` seconds; each chunk is encoded with
``overlap_s`` seconds of extra context on each side (clipped at the ends of the recording),
only its centre is kept, and the centres are concatenated. Every encoder frame is kept from
exactly one chunk, so nothing is lost or duplicated, and each kept frame (away from the ends)
had at least ``overlap_s`` of context on both sides. This is how toolkits that cannot run
full context transcribe long audio (e.g. NeMo's buffered/chunked inference,
ESPnet's streaming-style long-form decoding); the study compares it with ``full_context``.

Frame alignment with the front end: the chunks are cut on the *encoder* frame grid, after
the front end. The front end (a strided conv stack, total stride S, receptive field R; Conv2d
4x: S = 4, R = 7 feature frames) is run over the whole recording exactly —
``full_context.frontend_in_chunks``, in time pieces that overlap by R − S frames — so encoder
frame t always comes from feature frames [S·t, S·t + R), whichever chunk it lands in (an
optional context conv, ``context_kernel``, then runs once over all encoder frames). A
chunk [s, e) of encoder frames therefore corresponds to feature frames [S·s, S·(e − 1) + R),
and chunk boundaries never fall between the frames of one subsampling window. Cutting the
features instead and running the front end per chunk gives the same frames when the feature
cut is a multiple of S and R − S frames of overlap are added; it is the same computation.

Each chunk is an independent utterance for the encoder: positions restart at 0 (CAPE
centres on the chunk), which is the point of chunked inference — the encoder never sees an
input longer than ``chunk_s + 2·overlap_s``. Chunks are batched (``batch_chunks`` at a time,
padded) for speed; the encoder masks padding, so batching does not change the output.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .full_context import DEFAULT_FRONTEND_CHUNK, frontend_in_chunks


class Window(NamedTuple):
    """Encoder frames [start, end) are encoded together; [keep_start, keep_end) are kept."""

    start: int
    end: int
    keep_start: int
    keep_end: int


def chunk_windows(n_frames: int, chunk: int, overlap: int) -> list[Window]:
    """Windows over frames [0, n_frames): the kept parts [c·chunk, (c + 1)·chunk) partition
    the frames (the last one shorter); each window adds ``overlap`` frames of context on each
    side, clipped to the recording."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 frame, got {chunk}")
    if overlap < 0:
        raise ValueError(f"overlap must be >= 0 frames, got {overlap}")
    windows = []
    for ks in range(0, n_frames, chunk):
        ke = min(n_frames, ks + chunk)
        windows.append(Window(max(0, ks - overlap), min(n_frames, ke + overlap), ks, ke))
    return windows


def seconds_to_frames(chunk_s: float, overlap_s: float, frame_shift_s: float) -> tuple[int, int]:
    """(chunk, overlap) in encoder frames, rounded to the nearest frame."""
    if not chunk_s > 0:
        raise ValueError(f"chunk_s must be > 0 seconds, got {chunk_s}")
    if overlap_s < 0:
        raise ValueError(f"overlap_s must be >= 0 seconds, got {overlap_s}")
    return max(1, round(chunk_s / frame_shift_s)), max(0, round(overlap_s / frame_shift_s))


def encode_chunks(
    encoder: nn.Module,
    x: torch.Tensor,
    lengths: torch.Tensor,
    chunk: int,
    overlap: int,
    batch_chunks: int = 16,
) -> torch.Tensor:
    """Encode subsampled frames x (B, T', D) chunk by chunk and stitch: -> (B, T', D_enc).

    Frames past each utterance's length are 0, as the encoder leaves them."""
    B, T, _ = x.shape
    jobs = [(b, w) for b in range(B) for w in chunk_windows(int(lengths[b]), chunk, overlap)]
    jobs.sort(key=lambda j: j[1].end - j[1].start)  # similar widths together: less padding
    out = None
    for g in range(0, len(jobs), batch_chunks):
        group = jobs[g: g + batch_chunks]
        width = max(w.end - w.start for _, w in group)
        xb = x.new_zeros(len(group), width, x.size(2))  # (G, W, D)
        lens = torch.tensor([w.end - w.start for _, w in group], device=x.device)
        for i, (b, w) in enumerate(group):
            xb[i, : w.end - w.start] = x[b, w.start: w.end]
        enc, _ = encoder(xb, lens)  # (G, W, D_enc)
        if out is None:
            out = enc.new_zeros(B, T, enc.size(2))
        for i, (b, w) in enumerate(group):
            out[b, w.keep_start: w.keep_end] = enc[i, w.keep_start - w.start: w.keep_end - w.start]
    if out is None:  # every utterance empty
        out = x.new_zeros(B, T, getattr(encoder, "d_model", x.size(2)))
    return out


def encode_chunked(
    model: nn.Module,
    features: torch.Tensor,
    lengths: torch.Tensor,
    *,
    chunk_s: float = 20.0,
    overlap_s: float = 4.0,
    batch_chunks: int = 16,
    frontend_chunk: int = DEFAULT_FRONTEND_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked encoding: features (B, T, F) at 10 ms -> enc (B, T', D), enc_lengths (B,).

    ``model`` is an ``ASRModel`` (``.frontend``, ``.encoder``, ``.frame_shift_s``). When one
    chunk plus its context covers a whole utterance, the result equals ``model.encode``."""
    x, enc_lengths = frontend_in_chunks(model.frontend, features, lengths, frontend_chunk)
    chunk, overlap = seconds_to_frames(chunk_s, overlap_s, model.frame_shift_s)
    return encode_chunks(model.encoder, x, enc_lengths, chunk, overlap, batch_chunks), enc_lengths


__all__ = ["Window", "chunk_windows", "encode_chunked", "encode_chunks", "seconds_to_frames"]
