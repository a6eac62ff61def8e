"""Audio that is not what the manifest says, through evaluate.py and transcribe.py: a truncated
file or a segment past its file stops the run with one line naming the manifest line and file;
a whole file longer than its manifest duration is one counted warning per set; resampling is one
line per set; channels that cancel in the downmix are refused, not transcribed as silence."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from tiny_run import make_run, one_error_line, run_entry

SR = 16000


def speechlike(seconds, sr=SR, seed=0):
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * sr))).astype(np.float32)


def manifest(path, rows):
    path.write_text("".join(json.dumps({"id": i, "audio_filepath": str(a), "duration": d, "text": "hello world"}) + "\n"
                            for i, a, d in rows))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("run") / "run")


def test_evaluate_counts_short_durations_and_resampling_once_per_set(run, tmp_path):
    long = tmp_path / "long.wav"
    sf.write(str(long), speechlike(4.0), SR)  # the manifest says 2 s: half of it would be scored
    narrow = tmp_path / "narrow.wav"
    sf.write(str(narrow), speechlike(2.0, 8000, seed=1), 8000)
    exact = tmp_path / "exact.wav"
    sf.write(str(exact), speechlike(1.5, seed=2), SR)
    test = manifest(tmp_path / "mixed.jsonl", [("long", long, 2.0), ("narrow", narrow, 2.0), ("exact", exact, 1.5)])
    proc = run_entry("evaluate.py", f"run={run}", f"data.test={test}", "device=cpu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    warnings = [line for line in out.splitlines() if "whole files longer than their manifest duration" in line]
    assert len(warnings) == 1, out[-3000:]
    assert "mixed: 1 of 3 utterances are whole files longer than their manifest duration by more than 0.1 s" \
        in warnings[0]
    assert f"{test}:1: file 4.00s, duration 2.00s" in warnings[0]
    resampled = [line for line in out.splitlines() if "resampled" in line]
    assert len(resampled) == 1 and "mixed: 1 of 3 files resampled 8000 -> 16000 Hz on load" in resampled[0], out[-3000:]
    scored = [json.loads(line) for line in (run / "eval" / "mixed" / "per_utt.jsonl").read_text().splitlines()]
    assert [r["id"] for r in scored] == ["long", "narrow", "exact"]  # reported, still scored as the manifest says


def test_transcribe_refuses_a_truncated_wav_read_whole(run, tmp_path):
    cut = tmp_path / "cut.wav"
    sf.write(str(cut), speechlike(4.0), SR, subtype="PCM_16")
    cut.write_bytes(cut.read_bytes()[: 44 + 4 * SR])  # header intact, 2 of 4 s of data
    proc = run_entry("transcribe.py", f"run={run}", f"audio={cut}", cwd=tmp_path)
    line = one_error_line(proc)
    assert f"cannot load audio {cut}: truncated: the WAV header declares 4.000s of audio but the file holds 2.000s" \
        in line


@pytest.mark.slow
def test_evaluate_stops_on_a_segment_past_its_file_before_decoding(run, tmp_path):
    good = tmp_path / "good.wav"
    sf.write(str(good), speechlike(2.0), SR)
    short = tmp_path / "short.wav"
    sf.write(str(short), speechlike(1.0), SR)
    test = manifest(tmp_path / "bad.jsonl", [("good", good, 2.0), ("short", short, 3.0)])
    proc = run_entry("evaluate.py", f"run={run}", f"data.test={test}", "device=cpu", cwd=tmp_path)
    line = one_error_line(proc)
    assert line.startswith(f"error: {test}:2: {short} holds 1.000s of audio but the manifest's segment ends at 3.000s")
    assert "1 of 2 utterances of set 'bad' end past their file" in line
    assert not (run / "eval" / "bad").exists()  # nothing scored, nothing written


@pytest.mark.slow
def test_evaluate_refuses_anti_phase_stereo(run, tmp_path):
    left = speechlike(2.0)
    anti = tmp_path / "anti.wav"
    sf.write(str(anti), np.stack([left, -left], axis=1), SR, subtype="FLOAT")
    test = manifest(tmp_path / "stereo.jsonl", [("anti", anti, 2.0)])
    proc = run_entry("evaluate.py", f"run={run}", f"data.test={test}", "device=cpu", cwd=tmp_path)
    line = one_error_line(proc)
    assert line.startswith(f"error: {test}:1: cannot load audio {anti}: its 2 channels cancel when averaged to mono")
    assert not (run / "eval" / "stereo" / "per_utt.jsonl").exists()


@pytest.mark.slow
def test_transcribe_reports_resampling(run, tmp_path):
    narrow = tmp_path / "narrow.wav"
    sf.write(str(narrow), speechlike(2.0, 8000), 8000)
    proc = run_entry("transcribe.py", f"run={run}", f"audio={narrow}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[transcribe] resampled 8000 -> 16000 Hz on load" in proc.stderr
    assert "[transcribe] 2.0 s of audio" in proc.stderr
