"""Shared fixtures: small audio files written with soundfile into tmp_path."""

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one pytest-xdist worker per core: one math thread each, and in the entry points the
    # tests start (set before torch is imported, so torch's pool is sized by it), not a pool per core in
    # each worker fighting for the same cores
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import sys

import numpy as np
import pytest
import soundfile as sf


@pytest.fixture(autouse=True)
def _process_rank_restored():
    """Lightning's DDP strategy sets the process-wide ``rank_zero_only.rank`` when a Trainer is built
    (tests/test_slurm.py builds ranks 11 and 15 in-process); left behind, every later in-process run
    of the same pytest worker takes itself for a non-zero rank and writes no logs. Put it back."""
    module = sys.modules.get("lightning_utilities.core.rank_zero")
    before = getattr(module.rank_zero_only, "rank", None) if module else None
    yield
    module = sys.modules.get("lightning_utilities.core.rank_zero")
    if module is not None and hasattr(module.rank_zero_only, "rank"):
        module.rank_zero_only.rank = before if before is not None else 0


def tone(duration_s, sample_rate=16000, freq=440.0, amplitude=0.5, channels=1):
    """A sine tone, (N,) or (N, channels) float32; channel c has amplitude / (c + 1)."""
    t = np.arange(int(round(duration_s * sample_rate))) / sample_rate
    wave = (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    if channels == 1:
        return wave
    return np.stack([wave / (c + 1) for c in range(channels)], axis=1)


@pytest.fixture()
def write_audio(tmp_path):
    """write_audio(name, data=None, sample_rate=16000, duration_s=1.0, **sf_kwargs) -> Path.

    ``data`` defaults to a 440 Hz tone; format follows the extension unless given.
    """

    def write(name, data=None, sample_rate=16000, duration_s=1.0, **sf_kwargs):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            data = tone(duration_s, sample_rate)
        sf.write(str(path), data, sample_rate, **sf_kwargs)
        return path

    return write
