"""scan_audio: each set's files against its manifest, from the headers: errors for a file that
cannot hold its segment, one counted warning for whole files longer than their duration, one
line per set for resampling and downmixing."""

import logging

import numpy as np
import pytest

from asr_pe.data.audio import AudioError
from asr_pe.data.audio_checks import WHOLE_FILE_TOLERANCE_S, scan_audio
from asr_pe.data.manifest import Utterance

SR = 16000


def utt(path, duration, offset=0.0, uid=None, line=1):
    return Utterance(id=uid or f"{path.stem}_{offset:g}", audio_filepath=str(path), duration=duration, text="a",
                     offset=offset, source=f"test.jsonl:{line}")


def tone(seconds, sr=SR, channels=1):
    x = (0.3 * np.sin(2 * np.pi * 200 * np.arange(int(seconds * sr)) / sr)).astype(np.float32)
    return x if channels == 1 else np.stack([x] * channels, axis=1)


def test_accurate_manifest_passes_and_counts_nothing(write_audio, caplog):
    utts = [utt(write_audio(f"a{i}.wav", tone(1 + i)), 1.0 + i, line=i + 1) for i in range(3)]
    with caplog.at_level(logging.INFO):
        scan = scan_audio(utts, sample_rate=SR, name="test")
    assert scan.summary() == {"utterances": 3, "files": 3, "resampled_files": {}, "multichannel_files": {},
                              "duration_shorter_than_file": 0}
    assert not caplog.records


def test_segment_past_the_end_of_its_file_is_an_error_naming_line_and_file(write_audio):
    good = utt(write_audio("good.wav", tone(2.0)), 2.0, line=1)
    short = utt(write_audio("short.wav", tone(1.0)), 2.0, line=2)  # manifest says 2 s, file holds 1 s
    seg = utt(write_audio("seg.wav", tone(3.0)), 1.0, offset=2.5, line=3)  # ends at 3.5 s of 3.0
    with pytest.raises(AudioError, match=r"^test\.jsonl:2: .*short\.wav holds 1\.000s of audio but the manifest's "
                                         r"segment ends at 2\.000s .*2 of 3 utterances of set 'dev' end past"):
        scan_audio([good, short, seg], sample_rate=SR, name="dev")


def test_truncated_wav_is_an_error_before_any_decoding(write_audio):
    path = write_audio("cut.wav", tone(2.0), subtype="PCM_16")
    path.write_bytes(path.read_bytes()[: 16000 * 2 // 2 + 44])  # half of the data, header intact
    with pytest.raises(AudioError, match=r"test\.jsonl:1: cannot load audio .*cut\.wav: truncated"):
        scan_audio([utt(path, 1.0)], sample_rate=SR, name="test")


def test_whole_files_longer_than_their_duration_are_one_counted_warning(write_audio, caplog):
    utts = [utt(write_audio(f"w{i}.wav", tone(4.0)), 2.0, line=i + 1) for i in range(3)]
    utts.append(utt(write_audio("ok.wav", tone(2.0)), 2.0 - WHOLE_FILE_TOLERANCE_S / 2, line=4))  # within tolerance
    # segments of one recording (offset 0 included) are what a segmented corpus looks like: no warning
    talk = write_audio("talk.wav", tone(6.0))
    utts += [utt(talk, 2.0, 0.0, line=5), utt(talk, 2.0, 3.0, line=6)]
    with caplog.at_level(logging.WARNING):
        scan = scan_audio(utts, sample_rate=SR, name="test")
    assert scan.summary()["duration_shorter_than_file"] == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith("test: 3 of 6 utterances are whole files longer than their manifest duration")
    assert "test.jsonl:1: file 4.00s, duration 2.00s" in warnings[0]


def test_resampling_and_downmixing_are_logged_once_per_set(write_audio, caplog):
    utts = [utt(write_audio(f"n{i}.wav", tone(1.0, 8000), sample_rate=8000), 1.0, line=i + 1) for i in range(4)]
    utts.append(utt(write_audio("st.wav", tone(1.0, channels=2)), 1.0, line=5))
    utts.append(utt(write_audio("wide.wav", tone(1.0, 22050), sample_rate=22050), 1.0, line=6))
    with caplog.at_level(logging.INFO):
        scan = scan_audio(utts, sample_rate=SR, name="test")
    assert scan.summary()["resampled_files"] == {8000: 4, 22050: 1}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["test: 5 of 6 files resampled 8000 Hz (4), 22050 Hz (1) -> 16000 Hz on load",
                     "test: 1 of 6 files averaged to mono on load (1 with 2 channels)"]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        scan_audio(utts[:4], sample_rate=SR, name="dev")
    assert [r.getMessage() for r in caplog.records] == ["dev: 4 of 4 files resampled 8000 -> 16000 Hz on load"]
