"""asr_pe.data.tempo: speech made faster or slower with its pitch kept (sox's ``tempo``), and the
dataset that evaluates at another speaking rate (``eval.tempo``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_pe.data.dataset import ASRDataset
from asr_pe.data.features import FbankExtractor
from asr_pe.data.manifest import read_manifest
from asr_pe.data.tempo import TempoError, check_tempo, time_stretch

SR = 16000
FRAME = SR // 100          # one 10 ms feature frame, in samples


def harmonic(seconds: float, f0: float = 220.0) -> torch.Tensor:
    """A voiced-like tone: f0 and its 2nd and 3rd harmonics, with a slow amplitude wobble."""
    t = np.arange(int(round(seconds * SR))) / SR
    env = 0.6 + 0.4 * np.sin(2 * np.pi * 1.5 * t)
    x = env * (0.30 * np.sin(2 * np.pi * f0 * t) + 0.15 * np.sin(2 * np.pi * 2 * f0 * t)
               + 0.08 * np.sin(2 * np.pi * 3 * f0 * t))
    return torch.tensor(x, dtype=torch.float32)


def dominant_hz(wave: torch.Tensor) -> float:
    """Frequency of the largest peak of the Hann-windowed spectrum, refined by parabolic interpolation."""
    x = wave.numpy().astype(np.float64)
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    k = int(np.argmax(spec[1:-1])) + 1
    a, b, c = np.log(spec[k - 1:k + 2])
    offset = 0.5 * (a - c) / (a - 2 * b + c)
    return (k + offset) * SR / len(x)


@pytest.mark.parametrize("factor", [0.8, 0.9, 1.1, 1.2, 1.3])
def test_a_stretched_wave_lasts_the_original_over_the_factor_at_the_same_pitch(factor):
    x = harmonic(2.0)
    y = time_stretch(x, factor, SR)
    # duration: N / factor within one feature frame (it is exact to a sample: round(N / factor))
    assert abs(len(y) - len(x) / factor) <= FRAME
    assert len(y) == round(len(x) / factor)
    # pitch: the 220 Hz fundamental stays within 2 Hz (a resampling "speed" change would move it
    # to 220·factor: 176 to 286 Hz)
    assert dominant_hz(x) == pytest.approx(220.0, abs=0.5)
    assert dominant_hz(y) == pytest.approx(220.0, abs=2.0)
    # the 2nd harmonic keeps its place too: energy near 440 Hz, not near 440·factor
    spec = np.abs(np.fft.rfft(y.numpy() * np.hanning(len(y))))
    freqs = np.fft.rfftfreq(len(y), 1 / SR)
    near = spec[(freqs > 430) & (freqs < 450)].max()
    moved = spec[(np.abs(freqs - 440 * factor) < 10)].max()
    assert near > 5 * moved
    # and the level: RMS within 30 % of the original's (no silence, no blow-up)
    assert float(y.pow(2).mean().sqrt()) == pytest.approx(float(x.pow(2).mean().sqrt()), rel=0.3)


def test_events_move_to_t_over_factor_and_factor_1_is_the_wave_itself():
    x = torch.zeros(3 * SR)
    t = torch.arange(SR // 2) / SR
    x[SR:SR + SR // 2] = 0.5 * torch.sin(2 * torch.pi * 300 * t)    # a burst at 1.0-1.5 s
    for factor in (0.8, 1.25):
        y = time_stretch(x, factor, SR)
        env = np.convolve(np.abs(y.numpy()), np.ones(160) / 160, "same")
        onset = np.argmax(env > 0.1) / SR
        assert onset == pytest.approx(1.0 / factor, abs=0.01)       # 1.25 s and 0.8 s, within 10 ms
    assert time_stretch(x, 1.0, SR) is x
    assert torch.equal(time_stretch(x, 1.2, SR), time_stretch(x, 1.2, SR))   # deterministic


def test_bad_factors_are_refused():
    assert check_tempo(1) == 1.0
    for bad in (0, -1.2, 0.1, 5.0, float("nan"), "1.2", True):
        with pytest.raises(TempoError, match="must be a number in"):
            check_tempo(bad)


def test_the_dataset_stretches_before_the_features_and_reports_the_heard_duration(tmp_path):
    wav = tmp_path / "a.wav"
    sf.write(wav, harmonic(3.0).numpy(), SR, subtype="PCM_16")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(wav), "duration": 3.0, "text": "a"}) + "\n")
    utts = read_manifest(manifest)
    fbank = FbankExtractor()
    plain = ASRDataset(utts, None, fbank)[0]
    assert plain["features"].shape[0] == fbank.num_frames(3 * SR) == 298 and plain["duration"] == 3.0
    for factor, frames in ((1.2, fbank.num_frames(40000)), (0.8, fbank.num_frames(60000))):
        item = ASRDataset(utts, None, fbank, tempo=factor)[0]
        assert item["features"].shape[0] == frames                  # 248 and 598 frames
        assert item["duration"] == pytest.approx(3.0 / factor)
    with pytest.raises(TempoError):
        ASRDataset(utts, None, fbank, tempo=0.0)
