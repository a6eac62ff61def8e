"""Log-mel filterbank features, global CMVN and SpecAugment, all on ``(T, F)`` tensors."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from typing import Any

import torch
import torchaudio
import torchaudio.compliance.kaldi as kaldi

from asr_pe.io import atomic_write_json

# Kaldi computes on int16-scaled samples; its energy floors and dither assume that range.
INT16_SCALE = 32768.0


@contextlib.contextmanager
def _single_thread():
    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


class FbankExtractor:
    """Kaldi-compatible log-mel filterbank (``torchaudio.compliance.kaldi.fbank``).

    ``dither=0`` by default so that features are deterministic (tests, caching, CMVN);
    frames use ``snip_edges=True``: T = 1 + (N - window) // shift, 0 when N < window.
    """

    def __init__(
        self,
        num_mel_bins: int = 80,
        sample_rate: int = 16000,
        frame_length_ms: float = 25.0,
        frame_shift_ms: float = 10.0,
        dither: float = 0.0,
    ):
        assert num_mel_bins > 0, f"num_mel_bins must be > 0, got {num_mel_bins}"
        assert frame_shift_ms > 0 and frame_length_ms > 0, "frame length/shift must be > 0"
        self.num_mel_bins = int(num_mel_bins)
        self.sample_rate = int(sample_rate)
        self.frame_length_ms = float(frame_length_ms)
        self.frame_shift_ms = float(frame_shift_ms)
        self.dither = float(dither)
        # Same expressions as torchaudio.compliance.kaldi._get_waveform_and_window_properties.
        self.window_size = int(self.sample_rate * self.frame_length_ms * 0.001)
        self.window_shift = int(self.sample_rate * self.frame_shift_ms * 0.001)

    @property
    def frames_per_second(self) -> float:
        return 1000.0 / self.frame_shift_ms

    def num_frames(self, num_samples: int) -> int:
        """Frames that ``__call__`` returns for a wave of ``num_samples`` samples."""
        if num_samples < self.window_size:
            return 0
        return 1 + (num_samples - self.window_size) // self.window_shift

    def __call__(self, wave: torch.Tensor) -> torch.Tensor:
        """``wave`` (N,) float in [-1, 1] -> ``(T, num_mel_bins)`` float32."""
        assert wave.dim() == 1, f"expected a 1-D wave (N,), got shape {tuple(wave.shape)}"
        if wave.numel() < self.window_size:
            # kaldi.fbank asserts here; an empty feature matrix lets callers filter instead.
            return torch.zeros(0, self.num_mel_bins, dtype=torch.float32)
        # One thread: fbank is many small ops, which OpenMP spreads badly (measured 50x slower
        # with 2 threads than with 1 on a loaded 2-core machine).
        with _single_thread():
            feats = kaldi.fbank(
                (wave.to(torch.float32) * INT16_SCALE).unsqueeze(0),  # (1, N): kaldi wants (C, N)
                num_mel_bins=self.num_mel_bins,
                sample_frequency=float(self.sample_rate),
                frame_length=self.frame_length_ms,
                frame_shift=self.frame_shift_ms,
                dither=self.dither,
                snip_edges=True,
                energy_floor=0.0,
            )
        return feats.to(torch.float32).contiguous()  # (T, F)

    def config(self) -> dict[str, Any]:
        return {
            "num_mel_bins": self.num_mel_bins,
            "sample_rate": self.sample_rate,
            "frame_length_ms": self.frame_length_ms,
            "frame_shift_ms": self.frame_shift_ms,
            "dither": self.dither,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.config().items())
        return f"FbankExtractor({args})"


class GlobalCMVN:
    """Per-bin mean/variance normalisation with statistics of the training set."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, count: int = 0):
        mean = torch.as_tensor(mean, dtype=torch.float32).flatten()
        std = torch.as_tensor(std, dtype=torch.float32).flatten()
        assert mean.shape == std.shape, f"mean {tuple(mean.shape)} and std {tuple(std.shape)} differ"
        assert bool((std > 0).all()), "std must be > 0 in every bin"
        self.mean = mean
        self.std = std
        self.count = int(count)  # frames the statistics were computed from (informative)

    @property
    def num_features(self) -> int:
        return self.mean.numel()

    def __call__(self, feats: torch.Tensor) -> torch.Tensor:
        assert feats.dim() == 2 and feats.shape[1] == self.num_features, (
            f"CMVN expects (T, {self.num_features}) features, got {tuple(feats.shape)}"
        )
        return (feats - self.mean.to(feats)) / self.std.to(feats)

    @classmethod
    def from_features(cls, feature_stream: Iterable[torch.Tensor], *, min_std: float = 1e-5) -> "GlobalCMVN":
        """Streaming statistics in float64 (Chan et al. pairwise merge of chunk mean/M2).

        ``min_std`` floors the std of constant bins so normalisation stays finite.
        """
        count = 0
        mean = None
        m2 = None
        for index, feats in enumerate(feature_stream):
            assert feats.dim() == 2, f"features #{index}: expected (T, F), got {tuple(feats.shape)}"
            if mean is not None and feats.shape[1] != mean.numel():
                raise ValueError(
                    f"features #{index} have {feats.shape[1]} bins, earlier ones {mean.numel()}"
                )
            n = feats.shape[0]
            if n == 0:
                continue
            x = feats.to(torch.float64)
            chunk_mean = x.mean(dim=0)  # (F,)
            chunk_m2 = ((x - chunk_mean) ** 2).sum(dim=0)  # (F,)
            if mean is None:
                count, mean, m2 = n, chunk_mean, chunk_m2
                continue
            total = count + n
            delta = chunk_mean - mean
            mean = mean + delta * (n / total)
            m2 = m2 + chunk_m2 + delta**2 * (count * n / total)
            count = total
        if mean is None or count == 0:
            raise ValueError("GlobalCMVN.from_features: no feature frames to compute statistics from")
        std = torch.sqrt(m2 / count).clamp_min(min_std)
        return cls(mean.to(torch.float32), std.to(torch.float32), count=count)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist(), "count": self.count}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GlobalCMVN":
        return cls(torch.tensor(d["mean"]), torch.tensor(d["std"]), count=d.get("count", 0))

    def save(self, path: str | os.PathLike) -> None:
        """Atomic JSON write."""
        atomic_write_json(path, self.to_dict(), indent=None)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "GlobalCMVN":
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
            return cls.from_dict(d)
        except (OSError, json.JSONDecodeError, KeyError, TypeError, AssertionError) as e:
            raise ValueError(f"{path}: not a valid CMVN file ({type(e).__name__}: {e})") from None

    def __repr__(self) -> str:
        return f"GlobalCMVN(num_features={self.num_features}, count={self.count})"


class SpecAugment(torch.nn.Module):
    """Frequency and time masking (Park et al. 2019) with torchaudio's transforms.

    Time-mask width is adaptive: up to ``min(max_time_width, time_width_ratio * T)`` frames
    (torchaudio's ``p`` argument), as in the "LD" policy. Masks are filled with 0, the mean
    after CMVN. Acts only in training mode (``.train()``, the default); ``.eval()`` makes it
    the identity.

    ``seed``: the masks are drawn from a generator seeded with it, and torch's global random state
    is left as it was. Training gives each utterance of each epoch its own seed
    (`asr_pe.data.sampler.augment_seed`), so its masks do not depend on which loader worker or
    rank computes it, on prefetching, or on whether the run was stopped and resumed in between.
    Without a seed they come from the global state (torchaudio's masks take no generator).
    """

    def __init__(
        self,
        freq_masks: int = 2,
        freq_width: int = 27,
        time_masks: int = 2,
        time_width_ratio: float = 0.05,
        max_time_width: int = 40,
    ):
        super().__init__()
        assert freq_masks >= 0 and time_masks >= 0, "mask counts must be >= 0"
        assert 0.0 <= time_width_ratio <= 1.0, f"time_width_ratio must be in [0, 1], got {time_width_ratio}"
        self.freq_masks = int(freq_masks)
        self.freq_width = int(freq_width)
        self.time_masks = int(time_masks)
        self.time_width_ratio = float(time_width_ratio)
        self.max_time_width = int(max_time_width)
        self.freq_masking = torchaudio.transforms.FrequencyMasking(freq_mask_param=self.freq_width)
        self.time_masking = torchaudio.transforms.TimeMasking(
            time_mask_param=self.max_time_width, p=self.time_width_ratio
        )

    def forward(self, feats: torch.Tensor, seed: int | None = None) -> torch.Tensor:
        """``feats`` (T, F) -> (T, F), masked copy (the input is not modified)."""
        if not self.training:
            return feats
        assert feats.dim() == 2, f"SpecAugment expects (T, F), got {tuple(feats.shape)}"
        if feats.shape[0] == 0:
            return feats
        if seed is None:
            return self._masked(feats)
        with torch.random.fork_rng(devices=[]):  # the CPU state only: torchaudio draws masks there
            torch.random.default_generator.manual_seed(int(seed))
            return self._masked(feats)

    def _masked(self, feats: torch.Tensor) -> torch.Tensor:
        spec = feats.transpose(0, 1)  # (F, T): torchaudio masks (..., freq, time)
        if self.freq_width > spec.shape[0]:
            # A width above F would let the mask start at a negative index.
            freq = torchaudio.transforms.FrequencyMasking(freq_mask_param=spec.shape[0])
        else:
            freq = self.freq_masking
        for _ in range(self.freq_masks):
            spec = freq(spec, mask_value=0.0)
        for _ in range(self.time_masks):
            spec = self.time_masking(spec, mask_value=0.0)
        return spec.transpose(0, 1).contiguous()  # (T, F)

    def extra_repr(self) -> str:
        return (
            f"freq_masks={self.freq_masks}, freq_width={self.freq_width}, time_masks={self.time_masks}, "
            f"time_width_ratio={self.time_width_ratio}, max_time_width={self.max_time_width}"
        )
