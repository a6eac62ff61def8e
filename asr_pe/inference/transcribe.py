"""Transcribe one (long) recording with a trained run: full-context or chunked encoding.

``transcribe_file(run_dir, audio, mode="full"|"chunked", …) -> dict`` (transcript, timings,
peak memory) is what ``python transcribe.py`` calls. ``make_encode_fn`` is shared with
``evaluate.py`` (``eval.mode``) so both pick the encoding the same way; both load the run with
`asr_pe.inference.run_loading.load_run` and decode with `asr_pe.inference.decode.decode_batch`.
"""

from __future__ import annotations

import functools
import math
import resource
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from asr_pe.errors import ConfigError

from .chunked import encode_chunked
from .decode import check_decode_settings, decode_batch, effective_method
from .device import resolve_device
from .full_context import encode_full, resolve_block_size
from .remedies import check_remedies, parse_remedies, remedies_applied, remedy_label, run_train_seconds
from .run_loading import encoder_frames_fn, load_run, load_run_config

MODES = ("full", "chunked")
FEATURE_CHUNK_FRAMES = 6000  # fbank in 60 s pieces: kaldi.fbank holds several copies of its input


def make_encode_fn(
    model, mode: str = "full", *, block_size: int | str | None = None, chunk_s: float = 20.0,
    overlap_s: float = 4.0,
) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """(features (B, T, F), lengths) -> (enc, enc_lengths) for an inference mode.

    ``full``: one forward pass over the whole input, attention in query blocks of
    ``block_size`` rows (``"auto"``: sized from the length; None: unblocked);
    ``chunked``: ``chunk_s`` pieces with ``overlap_s`` context on each side."""
    if mode == "full":
        resolve_block_size(block_size, 1, 1)  # validate now, not after loading the audio
        return functools.partial(encode_full, model, block_size=block_size)
    if mode == "chunked":
        return functools.partial(encode_chunked, model, chunk_s=float(chunk_s), overlap_s=float(overlap_s))
    raise ValueError(f"inference mode must be one of {MODES}, got {mode!r}")


def check_mode_settings(mode: str, chunk_s: Any, overlap_s: Any, block_size: Any) -> None:
    """``mode``, ``chunk_s`` (> 0), ``overlap_s`` (>= 0), ``block_size``: ``ConfigError`` naming
    the key, before the run is loaded."""
    if mode not in MODES:
        raise ConfigError(f"mode={mode!r}: choose one of {', '.join(MODES)}")
    for key, value, strict in (("chunk_s", chunk_s, True), ("overlap_s", overlap_s, False)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < 0 or (strict and value == 0):
            raise ConfigError(f"{key}={value!r}: must be a number of seconds {'> 0' if strict else '>= 0'}")
    try:
        resolve_block_size(block_size, 1, 1)
    except ValueError as e:
        raise ConfigError(f"block_size={block_size!r}: {e}") from None


def check_audio_long_enough(audio, frames_of, *, offset: float, duration: float | None) -> int:
    """The file's sample rate; ``AudioError`` when the (segment of the) recording is too short
    to give one encoder frame, which would otherwise fail deep in the front end."""
    from asr_pe.data.audio import AudioError, audio_info

    frames, rate, _ = audio_info(audio)
    seconds = duration if duration is not None else max(0.0, frames / rate - float(offset))
    if frames_of(seconds) < 1:
        shortest = next((s / 100 for s in range(1, 1001) if frames_of(s / 100) >= 1), None)
        need = f"this model needs at least {shortest:.2f} s" if shortest else "this model gives it no encoder frame"
        raise AudioError(f"{audio}: {seconds:.3f} s of audio is too short to transcribe ({need})")
    return rate


def features_in_chunks(extractor, wave: torch.Tensor, chunk_frames: int = FEATURE_CHUNK_FRAMES) -> torch.Tensor:
    """``extractor(wave)`` computed ``chunk_frames`` frames at a time: (T, F).

    Kaldi fbank with ``snip_edges`` frames i from samples [i·shift, i·shift + window) and
    works per frame (DC removal, pre-emphasis, window, energy), so frames [a, b) from samples
    [a·shift, (b − 1)·shift + window) equal the whole-file frames exactly."""
    n = extractor.num_frames(wave.numel())
    if n <= chunk_frames:
        return extractor(wave)
    shift, win = extractor.window_shift, extractor.window_size
    parts = []
    for a in range(0, n, chunk_frames):
        b = min(n, a + chunk_frames)
        part = extractor(wave[a * shift: (b - 1) * shift + win])  # (b − a, F)
        assert part.size(0) == b - a, f"feature chunk [{a}, {b}) gave {part.size(0)} frames"
        parts.append(part)
    return torch.cat(parts, dim=0)


def peak_memory_mb(device: str | torch.device) -> float:
    """Peak resident memory of this process (CPU) or peak CUDA allocation, in MiB."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (r if sys.platform == "darwin" else r * 1024) / 2**20


def transcribe_file(
    run_dir: str | Path,
    audio: str | Path,
    *,
    mode: str = "full",
    chunk_s: float = 20.0,
    overlap_s: float = 4.0,
    block_size: int | str | None = "auto",
    checkpoint: str = "best",
    device: str = "auto",
    decode: Mapping[str, Any] | None = None,
    offset: float = 0.0,
    duration: float | None = None,
    remedy: str | None = None,
    train_length_s: float | None = None,
) -> dict[str, Any]:
    """Load a run, read ``audio`` (``offset``/``duration`` in seconds), encode and decode it.

    ``device``: auto (CUDA when available) | cpu | cuda[:N]. Returns {"text", "audio",
    "seconds_audio", "mode", "device", "encoder_frames", "time_features_s", "time_encode_s",
    "time_decode_s", "rtf", "peak_memory_mb", …}. ``remedy``: inference remedies for a recording
    longer than training (``remedies.py``; ``train_length_s`` defaults to the run's own)."""
    from asr_pe.data.audio import load_audio

    # every setting and the audio's length first: loading a large checkpoint takes a while
    check_mode_settings(mode, chunk_s, overlap_s, block_size)
    device = resolve_device(device)
    decode = dict(decode or {"method": "greedy"})
    run_cfg = load_run_config(run_dir)
    check_decode_settings(decode, ctc_weight=float(run_cfg.loss.get("ctc_weight", 1.0)),
                          transducer=bool(run_cfg.loss.get("transducer")))
    file_rate = check_audio_long_enough(audio, encoder_frames_fn(run_cfg), offset=offset, duration=duration)
    _, model, tokenizer, extractor, cmvn, ckpt = load_run(run_dir, checkpoint, device)
    decode["method"] = effective_method(decode.get("method", "greedy"), has_ctc=model.ctc_head is not None,
                                        has_transducer=model.transducer is not None)
    encode = make_encode_fn(model, mode, block_size=block_size, chunk_s=chunk_s, overlap_s=overlap_s)
    remedies = parse_remedies(remedy)
    if remedies:
        check_remedies(model, remedies)
        train_length_s = float(train_length_s or run_train_seconds(run_dir))
    t0 = time.perf_counter()
    wave = load_audio(audio, offset=offset, duration=duration, sample_rate=extractor.sample_rate)
    feats = cmvn(features_in_chunks(extractor, wave))  # (T, F)
    if feats.size(0) == 0:
        from asr_pe.data.audio import AudioError

        raise AudioError(f"{audio}: shorter than one feature frame ({wave.numel()} samples)")
    t1 = time.perf_counter()
    batch = {"features": feats[None], "feature_lengths": torch.tensor([feats.size(0)])}
    timing: dict[str, float] = {}

    def timed_encode(f, lengths):
        s = time.perf_counter()
        out = encode(f, lengths)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)  # CUDA kernels run asynchronously: wait before reading the clock
        timing["encode"] = time.perf_counter() - s
        return out

    with torch.inference_mode(), remedies_applied(model, remedies, train_length_s):
        text = decode_batch(model, batch, tokenizer, decode, device, encode=timed_encode)[0]
    t2 = time.perf_counter()
    seconds_audio = wave.numel() / extractor.sample_rate
    frames = int(model.frontend.output_lengths(batch["feature_lengths"])[0])
    n_heads = model.encoder.layers[0].attn.n_heads
    return {
        "text": text,
        "audio": str(audio),
        "run": str(run_dir),
        "checkpoint": ckpt.name,
        "mode": mode,
        "device": device,
        "block_size": resolve_block_size(block_size, frames, n_heads) if mode == "full" else None,
        "chunk_s": chunk_s if mode == "chunked" else None,
        "overlap_s": overlap_s if mode == "chunked" else None,
        "decode": decode.get("method", "greedy"),
        "remedy": remedy_label(remedies),
        "seconds_audio": round(seconds_audio, 3),
        "file_sample_rate": file_rate,  # resampled on load to the run's rate when they differ
        "sample_rate": extractor.sample_rate,
        "encoder_frames": frames,
        "time_features_s": round(t1 - t0, 3),
        "time_encode_s": round(timing.get("encode", float("nan")), 3),
        "time_decode_s": round(t2 - t1 - timing.get("encode", 0.0), 3),
        "rtf": round((t2 - t0) / max(seconds_audio, 1e-9), 4),
        "peak_memory_mb": round(peak_memory_mb(device), 1),
        "threads": torch.get_num_threads(),
    }


__all__ = ["MODES", "check_audio_long_enough", "check_mode_settings", "features_in_chunks", "make_encode_fn",
           "peak_memory_mb", "transcribe_file"]
