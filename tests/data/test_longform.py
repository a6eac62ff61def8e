"""Long-form builder: tolerance, order, exact audio, no speaker mixing, determinism, full mode."""

import json

import numpy as np
import pytest
import soundfile as sf

from asr_pe.data.longform import LongformError, build_longform, plan_windows
from asr_pe.data.manifest import Utterance, read_manifest, write_manifest

SR = 16000
GAP = 0.5


def make_corpus(root, spec):
    """spec: list of (speaker, duration s). Each utterance is a constant tone of its own level."""
    root.mkdir(parents=True, exist_ok=True)
    utts = []
    for i, (spk, dur) in enumerate(spec):
        path = root / f"u{i:03d}.wav"
        level = (i + 1) / 64.0                       # exactly representable in int16
        sf.write(path, np.full(int(round(dur * SR)), level, dtype=np.float32), SR, subtype="PCM_16")
        utts.append(Utterance(id=f"u{i:03d}", audio_filepath=str(path), duration=dur,
                              text=f"word{i} w{i}", speaker=spk))
    return utts


SPEC = ([("A", d) for d in (1.2, 0.8, 2.0, 1.5, 0.9, 3.1, 1.0, 1.7, 2.2, 0.6, 1.4)]
        + [("B", d) for d in (2.5, 1.1, 0.7, 1.9, 2.8, 1.3)])


@pytest.fixture()
def corpus(tmp_path):
    return make_corpus(tmp_path / "src", SPEC)


def frames(path):
    return sf.info(str(path)).frames


def test_windows_within_tolerance_and_non_overlapping():
    rng = np.random.default_rng(0)
    for _ in range(50):
        durs = list(rng.uniform(0.3, 4.0, size=40))
        target, tol = float(rng.uniform(2, 20)), 0.15
        windows = plan_windows(durs, target, gap_s=GAP, tolerance=tol)
        last_stop = 0
        for a, b in windows:
            assert a >= last_stop and b > a                 # ordered, non-overlapping
            span = sum(durs[a:b]) + GAP * (b - a - 1)
            assert target * (1 - tol) <= span <= target * (1 + tol) + 1e-9
            last_stop = b


def test_recordings_meet_targets_and_join_transcripts_in_order(tmp_path, corpus):
    out, report = build_longform(corpus, [3, 6], tmp_path / "lf", gap_s=GAP, tolerance=0.15)
    by_id = {u.id: u for u in corpus}
    order = {u.id: i for i, u in enumerate(corpus)}
    sources = json.loads((tmp_path / "lf" / "sources.json").read_text())
    assert report.made == {"3": sum(u.id.startswith("lf3_") for u in out),
                           "6": sum(u.id.startswith("lf6_") for u in out)}
    assert report.made["3"] >= 3 and report.made["6"] >= 2
    for u in out:
        target = float(u.id[2:].split("_")[0])
        assert target * 0.85 <= u.duration <= target * 1.15
        parts = [by_id[s] for s in sources[u.id]]
        idx = [order[p.id] for p in parts]
        assert idx == list(range(idx[0], idx[0] + len(idx)))          # consecutive in the manifest
        assert u.text == " ".join(p.text for p in parts)              # joined in order
        assert {p.speaker for p in parts} == {u.speaker}               # never mixed
        assert u.id.split("_")[1] == u.speaker
    # recordings of one target never share a source utterance
    for t in ("lf3_", "lf6_"):
        used = [s for uid, src in sources.items() if uid.startswith(t) for s in src]
        assert len(used) == len(set(used))


def test_audio_is_parts_and_silent_gaps(tmp_path, corpus):
    out, _ = build_longform(corpus, [6], tmp_path / "lf", gap_s=GAP)
    sources = json.loads((tmp_path / "lf" / "sources.json").read_text())
    by_id = {u.id: u for u in corpus}
    gap = int(GAP * SR)
    for u in out:
        parts = [by_id[s] for s in sources[u.id]]
        n_parts = [frames(p.audio_filepath) for p in parts]
        wave, sr = sf.read(u.audio_filepath, dtype="float32")
        assert sr == SR and sf.info(u.audio_filepath).format == "FLAC"
        assert len(wave) == sum(n_parts) + gap * (len(parts) - 1)
        assert u.duration == pytest.approx(len(wave) / SR)
        pos = 0
        for k, (p, n) in enumerate(zip(parts, n_parts)):
            if k:
                assert np.all(wave[pos:pos + gap] == 0)
                pos += gap
            level = (int(p.id[1:]) + 1) / 64.0
            np.testing.assert_allclose(wave[pos:pos + n], level, atol=1 / 32768)
            pos += n


def test_manifest_round_trip_with_relative_paths(tmp_path, corpus):
    out_manifest = tmp_path / "sets" / "long.jsonl"
    out, _ = build_longform(corpus, [3], tmp_path / "sets" / "long", manifest_path=out_manifest)
    back = read_manifest(out_manifest)
    assert [(u.id, u.text, u.speaker, u.audio_filepath) for u in back] == \
        [(u.id, u.text, u.speaker, u.audio_filepath) for u in out]
    first = json.loads(out_manifest.read_text().splitlines()[0])
    assert not first["audio_filepath"].startswith("/")


def test_segments_with_offsets_in_one_file(tmp_path):
    # TED-LIUM style: one file per talk, utterances are (offset, duration) segments
    path = tmp_path / "talk.wav"
    wave = np.concatenate([np.full(SR * 2, (k + 1) / 64.0, np.float32) for k in range(5)])
    sf.write(path, wave, SR, subtype="PCM_16")
    utts = [Utterance(id=f"t_{k}", audio_filepath=str(path), duration=2.0, offset=2.0 * k,
                      text=f"s{k}", speaker="talk") for k in range(5)]
    out, _ = build_longform(utts, [4.5], tmp_path / "lf", gap_s=GAP)
    assert [u.text for u in out] == ["s0 s1", "s2 s3"]
    got, _ = sf.read(out[1].audio_filepath, dtype="float32")
    np.testing.assert_allclose(got[:2 * SR], 3 / 64.0, atol=1 / 32768)
    np.testing.assert_allclose(got[-2 * SR:], 4 / 64.0, atol=1 / 32768)


def test_target_needing_two_speakers_is_an_error_unless_allowed(tmp_path, corpus):
    # A holds 16.4 s + gaps, B 10.3 s + gaps: 25 s needs both
    with pytest.raises(LongformError, match="allow_mixed_speakers=True"):
        build_longform(corpus, [25], tmp_path / "lf", tolerance=0.1)
    out, _ = build_longform(corpus, [25], tmp_path / "lf", tolerance=0.1, allow_mixed_speakers=True)
    assert len(out) == 1 and out[0].speaker == "A+B" and out[0].id == "lf25_mix_0"


def test_missing_speaker_is_an_error_unless_allowed(tmp_path, corpus):
    corpus[4] = Utterance(id=corpus[4].id, audio_filepath=corpus[4].audio_filepath,
                          duration=corpus[4].duration, text=corpus[4].text, speaker=None)
    with pytest.raises(LongformError, match=r"entry 5 \(id 'u004'\) has no speaker"):
        build_longform(corpus, [3], tmp_path / "lf")
    out, _ = build_longform(corpus, [3], tmp_path / "lf", allow_mixed_speakers=True)
    assert out


def test_group_key_callable_and_returning_groups(tmp_path):
    # speaker A comes back after B: separate groups, ids keep counting, stay unique
    utts = make_corpus(tmp_path / "src", [("A", 2.0), ("A", 2.0), ("B", 2.0), ("B", 2.0),
                                          ("A", 2.0), ("A", 2.0)])
    out, report = build_longform(utts, [4.5], tmp_path / "lf", gap_s=GAP)
    assert [u.id for u in out] == ["lf4.5_A_0", "lf4.5_B_0", "lf4.5_A_1"] and report.groups == 3
    out2, report2 = build_longform(utts, ["full"], tmp_path / "lf2", group_key=lambda u: "all")
    assert report2.groups == 1 and len(out2) == 1 and out2[0].speaker == "A+B"


def test_deterministic_bytes(tmp_path, corpus):
    a, _ = build_longform(corpus, [3, 6], tmp_path / "a" / "lf", manifest_path=tmp_path / "a" / "m.jsonl")
    b, _ = build_longform(corpus, [3, 6], tmp_path / "b" / "lf", manifest_path=tmp_path / "b" / "m.jsonl")
    assert (tmp_path / "a" / "m.jsonl").read_bytes() == (tmp_path / "b" / "m.jsonl").read_bytes()
    for ua, ub in zip(a, b):
        assert ua.id == ub.id
        with open(ua.audio_filepath, "rb") as fa, open(ub.audio_filepath, "rb") as fb:
            assert fa.read() == fb.read()


def test_full_mode_one_recording_per_group(tmp_path, corpus):
    out, report = build_longform(corpus, ["full", 3], tmp_path / "lf", gap_s=GAP)
    full = [u for u in out if u.id.startswith("lffull_")]
    assert [u.id for u in full] == ["lffull_A_0", "lffull_B_0"] and report.made["full"] == 2
    for u, spk in zip(full, "AB"):
        members = [c for c in corpus if c.speaker == spk]
        assert u.text == " ".join(c.text for c in members)
        n = sum(frames(c.audio_filepath) for c in members) + int(GAP * SR) * (len(members) - 1)
        assert frames(u.audio_filepath) == n


def test_report_and_cap(tmp_path, corpus):
    # 12 s: A (16.4 s + gaps) gives one, B (10.3 s + 2.5 s of gaps = 12.8 s) cannot fit a window
    out, report = build_longform(corpus, [12], tmp_path / "lf", tolerance=0.05)
    assert report.made["12"] == len(out) >= 1
    assert report.too_short["12"] + report.no_fit["12"] == 1
    out1, report1 = build_longform(corpus, [2], tmp_path / "c1", max_per_duration=2, seed=0)
    full_count = len(build_longform(corpus, [2], tmp_path / "c0")[0])
    assert len(out1) == 2 and report1.capped["2"] == full_count - 2
    again, _ = build_longform(corpus, [2], tmp_path / "c2", max_per_duration=2, seed=0)
    assert [u.id for u in again] == [u.id for u in out1]
    assert "12" in report.summary()


def test_bad_targets(tmp_path, corpus):
    with pytest.raises(LongformError, match="neither a number"):
        build_longform(corpus, ["long"], tmp_path / "lf")
    with pytest.raises(LongformError, match="> 0"):
        build_longform(corpus, [0], tmp_path / "lf")
    with pytest.raises(LongformError, match="drop this target"):
        build_longform(corpus, [500], tmp_path / "lf", allow_mixed_speakers=True)


def test_make_longform_script(tmp_path, corpus, capsys):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "make_longform.py"
    spec = importlib.util.spec_from_file_location("make_longform", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "test.jsonl"
    write_manifest(src, corpus)
    out = tmp_path / "sets" / "test_long.jsonl"
    assert mod.main([f"in={src}", f"out={out}", "durations=[3,full]", "gap_s=0.5"]) == 0
    made = read_manifest(out)
    assert {u.id.split("_")[0] for u in made} == {"lf3", "lffull"}
    assert all(Path(u.audio_filepath).parent == tmp_path / "sets" / "test_long" for u in made)
    assert "full" in capsys.readouterr().out
    # mixing needed and not allowed: a clear message naming the manifest, exit code 1
    assert mod.main([f"in={src}", f"out={out}", "durations=[25]", "tolerance=0.1"]) == 1
    err = capsys.readouterr().err
    assert str(src) in err and "allow_mixed_speakers" in err
    with pytest.raises(SystemExit, match="bad argument"):
        mod.main([f"input={src}", f"out={out}"])
