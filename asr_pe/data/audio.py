"""Audio loading through soundfile (libsndfile): WAV, FLAC and NIST SPHERE.

Not ``torchaudio.load``: since torchaudio 2.9 it needs FFmpeg through torchcodec.

Policy:
- multi-channel audio is averaged to mono;
- multi-channel audio whose channels cancel when averaged (anti-phase stereo: the mono RMS
  below ``DOWNMIX_CANCEL_RATIO`` of the loudest channel's) raises ``AudioError``: it would be
  transcribed as silence;
- a file at another sample rate is resampled with ``torchaudio.functional.resample``
  (windowed-sinc, torchaudio's defaults); the result is clamped to [-1, 1]; a load is silent
  about it, the set-level scan (``audio_checks.scan_audio``) logs it once per set;
- a WAV file whose data chunk declares more bytes than the file holds (cut short by an
  interrupted copy) raises ``AudioError``: libsndfile would read the shorter file silently;
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

from asr_pe.errors import UserError

DEFAULT_END_TOLERANCE_S = 0.05
# Anti-phase channels: a downmix this much quieter than its loudest channel has cancelled out
# (uncorrelated channels of equal power give 1/sqrt(2), one silent channel 1/2).
DOWNMIX_CANCEL_RATIO = 0.1
# Below this channel RMS (-60 dBFS) the file is near-silent anyway and the ratio means nothing.
DOWNMIX_MIN_RMS = 1e-3
# RIFF data-chunk sizes that mean "unknown length" (streaming writers, RF64), not a promise.
_RIFF_UNSET_SIZES = (0, 0xFFFFFFFF)


class AudioError(UserError, RuntimeError):
    """An audio file that cannot be used; the message names the file (and manifest line)."""


def _fail(path: str, reason: str, source: str | None) -> AudioError:
    prefix = f"{source}: " if source else ""
    return AudioError(f"{prefix}cannot load audio {path}: {reason}")


def wav_truncation(path: str | os.PathLike) -> tuple[int, int] | None:
    """``(declared, present)`` data bytes when a RIFF/WAVE file's ``data`` chunk declares more
    bytes than the file holds after it (a file cut short); None for complete or non-WAV files.

    libsndfile reads such a file to its physical end without a word, so a WAV truncated to
    half its bytes would be half a recording scored against the whole transcript."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        size = os.fstat(f.fileno()).st_size
        pos = 12
        while pos + 8 <= size:
            f.seek(pos)
            chunk = f.read(8)
            declared = int.from_bytes(chunk[4:8], "little")
            if chunk[:4] == b"data":
                present = size - pos - 8
                if declared in _RIFF_UNSET_SIZES or declared <= present:
                    return None
                return declared, present
            pos += 8 + declared + (declared & 1)  # chunks are word-aligned
    return None


def _check_complete(path: str, frames: int, rate: int, source: str | None) -> None:
    cut = wav_truncation(path)
    if cut is not None:
        declared, present = cut
        declared_s = frames / rate * declared / max(present, 1)
        raise _fail(path, f"truncated: the WAV header declares {declared_s:.3f}s of audio but the file holds "
                          f"{frames / rate:.3f}s ({present} of {declared} data bytes); copy or download it again",
                    source)


def audio_info(path: str | os.PathLike, *, source: str | None = None) -> tuple[int, int, int]:
    """``(num_frames, sample_rate, channels)`` of a file without decoding it; a truncated WAV
    raises ``AudioError``."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise _fail(path, "file not found", source)
    try:
        info = sf.info(path)
    except (sf.SoundFileError, RuntimeError, OSError, ValueError) as e:
        raise _fail(path, f"unreadable ({e})", source) from None
    _check_complete(path, int(info.frames), int(info.samplerate), source)
    return int(info.frames), int(info.samplerate), int(info.channels)


def _downmix(data: np.ndarray, path: str, source: str | None) -> np.ndarray:
    """(n, channels) -> (n,) by averaging; channels that cancel are an ``AudioError``."""
    if data.shape[1] == 1:
        return data[:, 0]
    mono = data.mean(axis=1)  # (n,)
    channel_rms = float(np.sqrt(np.mean(np.square(data, dtype=np.float64), axis=0)).max())
    mono_rms = float(np.sqrt(np.mean(np.square(mono, dtype=np.float64))))
    if channel_rms > DOWNMIX_MIN_RMS and mono_rms < DOWNMIX_CANCEL_RATIO * channel_rms:
        raise _fail(path, f"its {data.shape[1]} channels cancel when averaged to mono (mono RMS {mono_rms:.2g}, "
                          f"loudest channel RMS {channel_rms:.2g}: anti-phase channels); fix the file, or keep "
                          "one channel (e.g. sox in.wav out.wav remix 1)", source)
    return mono


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
            _check_complete(path, total, file_rate, source)
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
    mono = _downmix(data, path, source)  # (n,)
    wave = torch.from_numpy(np.ascontiguousarray(mono, dtype=np.float32))
    if file_rate != sample_rate:
        wave = torchaudio.functional.resample(wave, file_rate, sample_rate)
    return wave.clamp_(-1.0, 1.0).contiguous()
