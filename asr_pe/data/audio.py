"""Audio loading through soundfile (libsndfile): WAV, FLAC and NIST SPHERE.

Not ``torchaudio.load``: since torchaudio 2.9 it needs FFmpeg through torchcodec.

Policy:
- multi-channel audio is averaged to mono;
- a file at another sample rate is resampled with ``torchaudio.functional.resample``
  (windowed-sinc, torchaudio's defaults); the result is clamped to [-1, 1];
- a segment (``offset``/``duration``) is read by seeking in frames, so long files are never
  decoded whole; a segment may overrun the end of the file by at most ``end_tolerance``
  seconds (manifest durations are rounded) and is then truncated; a longer overrun, an
  offset past the end, an empty, missing or unreadable file raise ``AudioError``.
"""

from __future__ import annotations

import os

import numpy as np
import soundfile as sf
import torch
import torchaudio

DEFAULT_END_TOLERANCE_S = 0.05


class AudioError(RuntimeError):
    """An audio file that cannot be used; the message names the file (and manifest line)."""


def _fail(path: str, reason: str, source: str | None) -> AudioError:
    prefix = f"{source}: " if source else ""
    return AudioError(f"{prefix}cannot load audio {path}: {reason}")


def audio_info(path: str | os.PathLike, *, source: str | None = None) -> tuple[int, int, int]:
    """``(num_frames, sample_rate, channels)`` of a file without decoding it."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise _fail(path, "file not found", source)
    try:
        info = sf.info(path)
    except (sf.SoundFileError, RuntimeError, OSError, ValueError) as e:
        raise _fail(path, f"unreadable ({e})", source) from None
    return int(info.frames), int(info.samplerate), int(info.channels)


def load_audio(
    path: str | os.PathLike,
    *,
    offset: float = 0.0,
    duration: float | None = None,
    sample_rate: int = 16000,
    source: str | None = None,
    end_tolerance: float = DEFAULT_END_TOLERANCE_S,
) -> torch.Tensor:
    """Load ``[offset, offset + duration)`` seconds of a file as mono float32 ``(num_samples,)``.

    ``source`` ("<manifest>:<line>") is prepended to error messages.
    """
    path = os.fspath(path)
    if offset < 0 or not np.isfinite(offset):
        raise _fail(path, f"offset must be a finite number >= 0, got {offset!r}", source)
    if duration is not None and (duration <= 0 or not np.isfinite(duration)):
        raise _fail(path, f"duration must be a finite number > 0, got {duration!r}", source)
    if not os.path.exists(path):
        raise _fail(path, "file not found", source)
    try:
        with sf.SoundFile(path) as f:
            file_rate = int(f.samplerate)
            total = int(f.frames)
            if total <= 0:
                raise _fail(path, "empty file (0 samples)", source)
            start = int(round(offset * file_rate))
            if start >= total:
                raise _fail(
                    path,
                    f"offset {offset:.3f}s is past the end of the file ({total / file_rate:.3f}s)",
                    source,
                )
            wanted = total - start if duration is None else int(round(duration * file_rate))
            overrun = start + wanted - total
            if overrun > 0:
                if overrun > end_tolerance * file_rate:
                    raise _fail(
                        path,
                        f"segment {offset:.3f}s + {duration:.3f}s ends past the end of the file "
                        f"({total / file_rate:.3f}s)",
                        source,
                    )
                wanted = total - start
            if start:
                f.seek(start)
            data = f.read(wanted, dtype="float32", always_2d=True)  # (n, channels)
    except AudioError:
        raise
    except (sf.SoundFileError, RuntimeError, OSError, ValueError) as e:
        hint = ""
        if path.lower().endswith(".sph"):
            hint = "; shorten-compressed SPHERE (e.g. WSJ) is not readable by libsndfile, convert it with sph2pipe"
        raise _fail(path, f"unreadable or corrupt ({e}){hint}", source) from None

    if data.shape[0] < wanted:
        # The header promised more frames than the file holds: a truncated file.
        raise _fail(path, f"truncated: expected {wanted} samples, read {data.shape[0]}", source)
    if not np.isfinite(data).all():
        raise _fail(path, "contains NaN or infinite samples", source)
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]  # (n,)
    wave = torch.from_numpy(np.ascontiguousarray(mono, dtype=np.float32))
    if file_rate != sample_rate:
        wave = torchaudio.functional.resample(wave, file_rate, sample_rate)
    return wave.clamp_(-1.0, 1.0).contiguous()
