"""Audio loading: formats, mono mix-down, resampling, segments and the errors for bad files."""

import numpy as np
import pytest
import torch

from asr_pe.data.audio import AudioError, audio_info, load_audio

SR = 16000


def ramp(n, sr=SR):
    """A signal whose sample values encode their position, exactly representable in int16."""
    return ((np.arange(n) % 2000) - 1000).astype(np.float32) / 32768.0


@pytest.mark.parametrize("name, kwargs", [("a.wav", {}), ("a.flac", {}), ("a.sph", {"format": "NIST"})])
def test_formats_read_exactly(write_audio, name, kwargs):
    x = ramp(8000)
    path = write_audio(name, x, subtype="PCM_16", **kwargs)
    wave = load_audio(path)
    assert wave.dtype == torch.float32 and wave.shape == (8000,)
    np.testing.assert_array_equal(wave.numpy(), x)


@pytest.mark.parametrize("name, kwargs", [("s.wav", {}), ("s.flac", {}), ("s.sph", {"format": "NIST"})])
def test_offset_and_duration_seek_by_frames(write_audio, name, kwargs):
    x = ramp(SR)
    path = write_audio(name, x, subtype="PCM_16", **kwargs)
    wave = load_audio(path, offset=0.25, duration=0.5)
    np.testing.assert_array_equal(wave.numpy(), x[4000:12000])
    tail = load_audio(path, offset=0.75)  # duration None: to the end of the file
    np.testing.assert_array_equal(tail.numpy(), x[12000:])


def test_stereo_is_averaged_to_mono(write_audio):
    left = ramp(4000)
    right = np.full(4000, 0.25, dtype=np.float32)
    path = write_audio("st.wav", np.stack([left, right], axis=1), subtype="FLOAT")
    wave = load_audio(path)
    assert wave.shape == (4000,)
    np.testing.assert_allclose(wave.numpy(), (left + right) / 2, atol=1e-7)


def test_other_sample_rate_is_resampled(write_audio):
    sr = 8000
    t = np.arange(sr) / sr
    tone = (0.5 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    path = write_audio("low.wav", tone, sample_rate=sr, subtype="FLOAT")
    wave = load_audio(path, sample_rate=SR)
    assert wave.shape == (SR,)  # one second at the target rate
    # The resampled signal is the same 300 Hz tone sampled at 16 kHz (away from the edges).
    expected = 0.5 * np.sin(2 * np.pi * 300 * np.arange(SR) / SR)
    np.testing.assert_allclose(wave.numpy()[800:-800], expected[800:-800], atol=2e-3)
    # Segment offsets are in seconds, independent of the file's rate.
    seg = load_audio(path, offset=0.5, duration=0.25, sample_rate=SR)
    assert seg.shape == (4000,)


def test_values_stay_in_unit_range(write_audio):
    path = write_audio("loud.wav", np.full(1000, 3.0, dtype=np.float32), subtype="FLOAT")
    assert float(load_audio(path).abs().max()) <= 1.0


def test_missing_file_names_file_and_source(tmp_path):
    missing = tmp_path / "gone.wav"
    with pytest.raises(AudioError, match=r"^m\.jsonl:7: cannot load audio .*gone\.wav: file not found"):
        load_audio(missing, source="m.jsonl:7")
    with pytest.raises(AudioError, match="gone.wav"):
        audio_info(missing)


def test_empty_file_zero_samples(write_audio):
    path = write_audio("empty.wav", np.zeros(0, dtype=np.float32), subtype="PCM_16")
    with pytest.raises(AudioError, match=r"empty\.wav: empty file \(0 samples\)"):
        load_audio(path)


def test_zero_byte_file(tmp_path):
    path = tmp_path / "zero.flac"
    path.write_bytes(b"")
    with pytest.raises(AudioError, match=r"zero\.flac: unreadable or corrupt"):
        load_audio(path)


@pytest.mark.parametrize("name", ["junk.wav", "junk.flac", "junk.sph"])
def test_corrupt_file_random_bytes(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(AudioError, match=rf"{name.replace('.', '[.]')}: unreadable or corrupt"):
        load_audio(path, source="m.jsonl:3")


def test_truncated_wav_is_detected(write_audio):
    path = write_audio("cut.wav", ramp(SR), subtype="PCM_16")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # header still promises 16000 frames
    # libsndfile trusts the file size and reads the half silently; the RIFF data chunk's
    # declared size is what catches it, with or without a manifest duration.
    for duration in (1.0, None):
        with pytest.raises(AudioError, match=r"cut\.wav: truncated: the WAV header declares 1\.000s of audio but "
                                             r"the file holds 0\.49\d+s"):
            load_audio(path, duration=duration)
    with pytest.raises(AudioError, match=r"cut\.wav: truncated"):
        audio_info(path)


def test_segment_past_end(write_audio):
    path = write_audio("short.wav", ramp(SR), subtype="PCM_16")  # 1.0 s
    with pytest.raises(AudioError, match=r"short\.wav: offset 1\.500s is past the end"):
        load_audio(path, offset=1.5, duration=0.2)
    with pytest.raises(AudioError, match=r"short\.wav: segment .* ends past the end of the file \(1\.000s\)"):
        load_audio(path, offset=0.5, duration=1.0)
    # A rounding-size overrun (manifest durations are rounded) is truncated, not an error.
    assert load_audio(path, offset=0.5, duration=0.51).shape == (8000,)


def test_bad_segment_arguments(write_audio):
    path = write_audio("a.wav")
    with pytest.raises(AudioError, match="offset must be"):
        load_audio(path, offset=-1.0)
    with pytest.raises(AudioError, match="duration must be"):
        load_audio(path, duration=0.0)


def test_audio_info(write_audio):
    path = write_audio("st.flac", np.zeros((2400, 2), dtype=np.float32), sample_rate=24000)
    assert audio_info(path) == (2400, 24000, 2)


def test_anti_phase_stereo_is_refused_not_transcribed_as_silence(write_audio):
    left = 0.5 * np.sin(2 * np.pi * 300 * np.arange(SR) / SR).astype(np.float32)
    path = write_audio("anti.wav", np.stack([left, -left], axis=1), subtype="FLOAT")
    with pytest.raises(AudioError, match=r"m\.jsonl:4: cannot load audio .*anti\.wav: its 2 channels cancel when "
                                         r"averaged to mono \(mono RMS 0, loudest channel RMS 0\.35"):
        load_audio(path, source="m.jsonl:4")
    # one channel silent (mono = half the other) and near-silent files are not cancellation
    quiet = write_audio("one.wav", np.stack([left, 0 * left], axis=1), subtype="FLOAT")
    np.testing.assert_allclose(load_audio(quiet).numpy(), left / 2, atol=1e-7)
    hiss = write_audio("hiss.wav", np.stack([1e-4 * left, -1e-4 * left], axis=1), subtype="FLOAT")
    assert float(load_audio(hiss).abs().max()) < 1e-6


def test_a_wav_with_unset_data_size_is_not_called_truncated(write_audio):
    """Streaming writers leave the data size 0 or 0xFFFFFFFF: a length unknown, not a promise."""
    from asr_pe.data.audio import wav_truncation

    path = write_audio("stream.wav", ramp(SR), subtype="PCM_16")
    data = bytearray(path.read_bytes())
    at = data.index(b"data") + 4
    assert wav_truncation(path) is None
    data[at:at + 4] = (0xFFFFFFFF).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    assert wav_truncation(path) is None
