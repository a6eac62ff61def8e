"""The synthetic length ladder: every rung holds the same utterances, parts lie where the audio
says, rungs' durations within their window, dev and test pools disjoint, the no-gap variant abuts."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_pe.data.manifest import read_manifest
from asr_pe.data.synth.ladder import LadderConfig, LadderError, build_ladder, ladder_sets, main

# two rungs of 2 and 4 utterances of 0.8-1.2 s; 2 top recordings from the test pool, 1 from dev
TINY = dict(rungs=(2, 4), min_duration=0.8, max_duration=1.2, test_recordings=2, dev_recordings=1,
            gaps=(0.5, 0.0))
SYNTH = {"seed": 3, "num_speakers": 2}


@pytest.fixture(scope="module")
def ladder(tmp_path_factory) -> Path:
    return build_ladder(tmp_path_factory.mktemp("ladder"), workers=2, progress=False, synth=SYNTH, **TINY)


def _samples(path) -> np.ndarray:
    return sf.read(path, dtype="int16")[0]


def test_every_rung_holds_the_same_utterances_one_speaker_per_recording(ladder):
    index = ladder_sets(ladder)
    for pool, entry in index["sets"].items():
        alone = read_manifest(entry["alone"])
        assert len(alone) == 4 * TINY[f"{pool}_recordings"]
        assert {u.speaker for u in alone[:4]} != {u.speaker for u in alone[4:]} or pool == "dev"
        assert set(entry["recordings"]) == {"gap500ms", "nogap"}
        for variant, rungs in entry["recordings"].items():
            assert list(rungs) == ["2", "4"]
            for rung, path in rungs.items():
                recs = read_manifest(path)
                n = round(float(rung) / 1.0)                          # utterances per recording
                assert len(recs) == len(alone) // n
                assert [p.id for r in recs for p in r.parts] == [u.id for u in alone]   # nested, in order
                by_id = {u.id: u for u in alone}
                for r in recs:
                    parts = [by_id[p.id] for p in r.parts]
                    assert len({u.speaker for u in parts}) == 1 and r.speaker == parts[0].speaker
                    speech = sum(u.duration for u in parts)
                    assert n * 0.8 <= speech <= n * 1.2                 # the rung's window (±20 %)
                    assert r.text == " ".join(u.text for u in parts)


@pytest.mark.parametrize("variant, gap", [("gap500ms", 0.5), ("nogap", 0.0)])
def test_parts_lie_where_the_audio_of_each_utterance_is(ladder, variant, gap):
    index = ladder_sets(ladder)
    alone = {u.id: u for u in read_manifest(index["sets"]["test"]["alone"])}
    sr, gaps = 16000, 0
    # one background per pool, estimated on its utterances: espeak's pauses are exact zeros
    assert index["sets"]["test"]["background"] == "digital silence"
    for path in index["sets"]["test"]["recordings"][variant].values():
        for rec in read_manifest(path):
            wave = _samples(rec.audio_filepath)
            for k, part in enumerate(rec.parts):
                a, b = round(part.start * sr), round(part.end * sr)
                np.testing.assert_array_equal(wave[a:b], _samples(alone[part.id].audio_filepath))
                if k:
                    prev = round(rec.parts[k - 1].end * sr)
                    assert a - prev == round(gap * sr)
                    # the synthetic background is digital silence: the gap holds zeros
                    assert not wave[prev:a].any()
                    gaps += 1
            if gap == 0:                                              # abutting exactly
                assert all(p.start == q.end for q, p in zip(rec.parts, rec.parts[1:]))
                assert len(wave) == sum(len(_samples(alone[p.id].audio_filepath)) for p in rec.parts)
            assert rec.duration == pytest.approx(len(wave) / sr)
    assert gaps == 4 * 1 + 2 * 3       # joins: 4 recordings of 2 parts, 2 of 4


def test_dev_and_test_pools_are_disjoint(ladder):
    index = ladder_sets(ladder)
    test = read_manifest(index["sets"]["test"]["alone"])
    dev = read_manifest(index["sets"]["dev"]["alone"])
    assert not {u.id for u in test} & {u.id for u in dev}
    assert all(u.id.startswith("synth_ladder_test_") for u in test)
    assert all(u.id.startswith("synth_ladder_dev_") for u in dev)

    def digest(u):
        return hashlib.sha256(Path(u.audio_filepath).read_bytes()).hexdigest()

    assert not {digest(u) for u in test} & {digest(u) for u in dev}
    assert index["shared_texts_dev_test"] == sum(u.text in {t.text for t in test} for u in dev)
    # every set name (manifest stem) is unique, so evaluate.py names each result folder after it
    stems = [Path(p).stem for e in index["sets"].values()
             for p in [e["alone"]] + [q for v in e["recordings"].values() for q in v.values()]]
    assert len(stems) == len(set(stems)) == 2 * (1 + 2 * 2)


def test_durations_of_the_pool_stay_in_the_window(ladder):
    for entry in ladder_sets(ladder)["sets"].values():
        assert all(0.8 <= u.duration <= 1.2 for u in read_manifest(entry["alone"]))


def test_a_complete_ladder_is_reused(ladder, monkeypatch):
    import asr_pe.data.synth.ladder as L
    monkeypatch.setattr(L, "_synthesize_pools", lambda *a, **k: pytest.fail("rebuilt a complete ladder"))
    assert build_ladder(ladder.parents[1], synth=SYNTH, **TINY) == ladder


@pytest.mark.slow
def test_build_is_deterministic(ladder, tmp_path):
    other = build_ladder(tmp_path, workers=1, progress=False, synth=SYNTH, **TINY)
    assert other.name == ladder.name

    def tree(d):
        files = sorted(d.glob("*.jsonl")) + sorted(d.rglob("*.flac"))
        return {f.relative_to(d).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}

    assert tree(other) == tree(ladder)


@pytest.mark.parametrize("options, message", [
    (dict(rungs=(5, 7.5, 10)), "does not divide the longest rung"),
    (dict(rungs=(6, 12)), "not a whole number of 2.5 s utterances"),
    (dict(rungs=(10, 5)), "rungs must be increasing"),
    (dict(min_duration=3, max_duration=2), "min_duration < max_duration"),
    (dict(gaps=(0.5, 0.5)), "gaps must be distinct"),
    (dict(test_recordings=0), ">= 1"),
])
def test_bad_ladders_are_clear_errors(options, message):
    with pytest.raises(LadderError, match=message):
        LadderConfig(**options)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--rungs", "6", "12"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: rung 6 s") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "synth_ladder").exists()


TINY_FLAGS = ["--rungs", "2", "4", "--min-duration", "0.8", "--max-duration", "1.2", "--test-recordings", "2",
              "--dev-recordings", "1", "--gaps", "0.5", "0", "--seed", "3", "--num-speakers", "2"]


def test_the_composition_gives_the_ladder_s_sets_without_audio(ladder, tmp_path, monkeypatch, capsys):
    """--composition archives what each recording is made of; `ladder_sets` takes that file for
    the folder and gives the same index and parts, read from manifests without audio or texts."""
    import lzma

    from asr_pe.data.synth.ladder import write_composition
    from asr_pe.evaluation.in_context import read_parts
    from asr_pe.io import read_jsonl

    monkeypatch.setenv("ASR_PE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "study" / "ladder_composition.jsonl.xz"
    assert main(["--root", str(ladder.parents[1]), "--no-progress", *TINY_FLAGS, "--composition", str(out)]) == 0
    assert f"composition: {out}" in capsys.readouterr().out
    assert write_composition(ladder, tmp_path / "again.jsonl.xz").read_bytes() == out.read_bytes()   # deterministic
    rows = [json.loads(line) for line in lzma.decompress(out.read_bytes()).decode().splitlines()]
    assert rows[0]["kind"] == "ladder" and rows[0]["folder"] == ladder.name
    assert not any("audio_filepath" in r or "text" in r for r in rows[1:])

    built, archived = ladder_sets(ladder), ladder_sets(out)
    folder = Path(archived["sets"]["test"]["alone"]).parent
    assert folder.is_relative_to(tmp_path / "cache" / "ladder_composition") and not list(folder.glob("**/*.flac"))
    assert {k: v for k, v in archived.items() if k != "sets"} == {k: v for k, v in built.items() if k != "sets"}
    n_manifests = 0
    for pool, entry in built["sets"].items():
        other = archived["sets"][pool]
        assert other["background"] == entry["background"] and other["recordings"].keys() == entry["recordings"].keys()
        pairs = [(entry["alone"], other["alone"])] + [
            (path, other["recordings"][variant][rung]) for variant, rungs in entry["recordings"].items()
            for rung, path in rungs.items()]
        for original, written in pairs:
            assert Path(original).name == Path(written).name         # the result folders' names
            want = [{k: v for k, v in r.items() if k not in ("audio_filepath", "text")} for _, r in read_jsonl(original)]
            assert [r for _, r in read_jsonl(written)] == want
            if "alone" not in original:
                assert read_parts(written) == read_parts(original) and len(read_parts(written)) >= 1
            n_manifests += 1
    assert n_manifests == 2 * (1 + 2 * 2)
    # written out once: a second call (or process) reads the same folder
    assert ladder_sets(out) == archived and len(list((tmp_path / "cache" / "ladder_composition").iterdir())) == 1


def test_what_is_no_composition_is_a_clear_error(ladder, tmp_path, monkeypatch, capsys):
    import lzma

    from asr_pe.data.synth.ladder import write_composition

    monkeypatch.setenv("ASR_PE_CACHE", str(tmp_path / "cache"))
    for name, data in [("plain.jsonl", b'{"id": "x"}\n'), ("other.jsonl.xz", lzma.compress(b'{"kind": "run"}\n'))]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(LadderError, match=f"{name}: not a ladder composition"):
            ladder_sets(tmp_path / name)
    with pytest.raises(LadderError, match="not a complete ladder"):
        write_composition(tmp_path, tmp_path / "c.jsonl.xz")
    # an output that cannot be written stops the command before it builds anything
    (tmp_path / "a_file").write_text("")
    assert main(["--root", str(tmp_path / "root"), *TINY_FLAGS, "--composition", str(tmp_path / "a_file" / "c.xz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --composition") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "root").exists()
