"""Shared fixtures: small audio files written with soundfile into tmp_path."""

import numpy as np
import pytest
import soundfile as sf


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
