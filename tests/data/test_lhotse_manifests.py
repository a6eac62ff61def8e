"""lhotse manifests in and out of ours (asr_pe/data/lhotse_manifests.py), on small manifests built here.

The lhotse lines are written by hand from the fields lhotse 1.x writes (Recording / SupervisionSegment /
MonoCut ``to_dict``), so these tests run without lhotse; where lhotse is installed, one more test
builds a CutSet with lhotse itself, imports it, and loads and validates our export with lhotse's
own loader (skipped only when lhotse is not installed).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_pe.data.lhotse_manifests import (
    LhotseManifestError,
    export_lhotse,
    import_cuts,
    import_supervisions,
    longform_entries,
    main,
)
from asr_pe.data.kaldi_export import recording_ids
from asr_pe.data.manifest import read_manifest, write_manifest


def _wav(path: Path, seconds: float, channels: int = 1) -> str:
    shape = (int(seconds * 16000), channels) if channels > 1 else (int(seconds * 16000),)
    sf.write(str(path), np.zeros(shape, np.float32), 16000)
    return str(path)


def _recording(rid: str, sources: list[tuple[list[int], str]], seconds: float) -> dict:
    chans = sorted(c for cs, _ in sources for c in cs)
    return {"id": rid, "sources": [{"type": "file", "channels": cs, "source": p} for cs, p in sources],
            "sampling_rate": 16000, "num_samples": int(seconds * 16000), "duration": seconds, "channel_ids": chans}


def _sup(sid, rid, start, duration, text, channel=0, speaker=None, **extra) -> dict:
    out = {"id": sid, "recording_id": rid, "start": start, "duration": duration, "channel": channel}
    if text is not None:
        out["text"] = text
    if speaker:
        out["speaker"] = speaker
    return {**out, "language": "English", **extra}


def _jsonl(path: Path, objs) -> Path:
    data = "".join(json.dumps(o) + "\n" for o in objs).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


@pytest.fixture
def corpus(tmp_path):
    """A mono talk (three supervisions, a 4 s gap, one without text), a stereo call (both channels and
    one side) and a two-file array recording (one file per channel)."""
    talk = _wav(tmp_path / "talk.wav", 20.0)
    call = _wav(tmp_path / "call.wav", 10.0, channels=2)
    a0, a1 = _wav(tmp_path / "array-0.wav", 6.0), _wav(tmp_path / "array-1.wav", 6.0)
    recs = [_recording("talk", [([0], talk)], 20.0), _recording("call", [([0, 1], call)], 10.0),
            _recording("array", [([0], a0), ([1], a1)], 6.0)]
    sups = [_sup("talk-1", "talk", 1.0, 3.0, "hello there", speaker="ann"),
            _sup("talk-2", "talk", 4.5, 3.5, "how are  you", speaker="ann"),
            _sup("talk-3", "talk", 12.0, 3.0, "fine thanks", speaker="ann"),
            _sup("talk-noise", "talk", 16.0, 1.0, None),
            _sup("call-1", "call", 0.5, 2.0, "both sides", channel=[0, 1], speaker="bob"),
            _sup("array-1", "array", 1.0, 2.0, "on the second mic", channel=1, speaker="cy")]
    return {"recs": _jsonl(tmp_path / "recordings.jsonl.gz", recs), "sups": _jsonl(tmp_path / "sups.jsonl.gz", sups),
            "talk": talk, "call": call, "a1": a1, "tmp": tmp_path, "rec_objs": recs, "sup_objs": sups}


def test_supervisions_become_utterances_with_offsets_channels_and_speakers(corpus):
    utts, stats = import_supervisions(corpus["recs"], corpus["sups"])
    by = {u.id: u for u in utts}
    assert set(by) == {"talk-1", "talk-2", "talk-3", "call-1", "array-1"}
    assert stats.without_text == 1 and stats.supervisions == 6  # counted, not silently lost
    assert (by["talk-2"].offset, by["talk-2"].duration, by["talk-2"].text) == (4.5, 3.5, "how are you")
    assert by["talk-2"].audio_filepath == corpus["talk"] and by["talk-2"].speaker == "ann"
    assert by["call-1"].audio_filepath == corpus["call"]  # both channels of the file: what our loader averages
    assert by["array-1"].audio_filepath == corpus["a1"]   # channel 1 lives in its own file
    path = corpus["tmp"] / "out.jsonl"
    write_manifest(path, utts)
    assert [u.id for u in read_manifest(path)] == [u.id for u in utts]  # a valid manifest of ours


def test_one_side_of_a_stereo_file_is_an_error_unless_downmixed(corpus):
    sups = corpus["sup_objs"] + [_sup("call-b", "call", 3.0, 2.0, "side b only", channel=1)]
    path = _jsonl(corpus["tmp"] / "sups_b.jsonl", sups)
    with pytest.raises(LhotseManifestError, match=r"sups_b\.jsonl:7: supervision 'call-b' is on channel\(s\) \[1\]"):
        import_supervisions(corpus["recs"], path)
    utts, stats = import_supervisions(corpus["recs"], path, channels="downmix")
    assert stats.downmixed_channel_subsets == 1 and "call-b" in {u.id for u in utts}
    both = _jsonl(corpus["tmp"] / "both.jsonl", [_sup("array-both", "array", 1.0, 1.0, "two mics", channel=[0, 1])])
    with pytest.raises(LhotseManifestError, match=r"both\.jsonl:1: .* which no one file of recording 'array' holds"):
        import_supervisions(corpus["recs"], both, channels="downmix")


@pytest.mark.parametrize("bad, says", [
    ({"sources": [{"type": "url", "channels": [0], "source": "https://x/y.wav"}]}, "source 0 is of type 'url'"),
    ({"transforms": [{"name": "Speed", "kwargs": {"factor": 1.1}}]}, "has a 'Speed' transform"),
])
def test_audio_that_is_not_the_file_on_disk_is_refused_naming_the_line(corpus, bad, says):
    recs = [dict(corpus["rec_objs"][0], **bad)] + corpus["rec_objs"][1:]
    with pytest.raises(LhotseManifestError, match=rf"recs\.jsonl:1: recording 'talk' {says}"):
        import_supervisions(_jsonl(corpus["tmp"] / "recs.jsonl", recs), corpus["sups"])


def test_a_supervision_past_its_recording_or_of_an_unknown_recording_is_an_error(corpus):
    past = _jsonl(corpus["tmp"] / "past.jsonl", [_sup("x", "talk", 19.0, 3.0, "too long")])
    with pytest.raises(LhotseManifestError, match=r"past\.jsonl:1: supervision 'x' ends at 22\.000 s, past"):
        import_supervisions(corpus["recs"], past)
    unknown = _jsonl(corpus["tmp"] / "unknown.jsonl", [_sup("x", "nope", 1.0, 1.0, "who")])
    with pytest.raises(LhotseManifestError, match=r"unknown\.jsonl:1: recording id 'nope' is not in"):
        import_supervisions(corpus["recs"], unknown)


def test_long_form_entries_join_consecutive_supervisions_of_a_recording(corpus):
    utts, _ = import_supervisions(corpus["recs"], corpus["sups"])
    long = {u.id: u for u in longform_entries(utts, max_gap_s=2.0)}
    # talk: 1.0-4.0 and 4.5-8.0 join (0.5 s gap); 12.0 starts after a 4 s gap: a second run
    assert set(long) >= {"talk-part1", "talk-part2"}
    first = long["talk-part1"]
    assert (first.offset, first.duration, first.text) == (1.0, 7.0, "hello there how are you")
    assert [(p.id, p.start, p.end) for p in first.parts] == [("talk-1", 0.0, 3.0), ("talk-2", 3.5, 7.0)]
    assert first.speaker == "ann" and long["talk-part2"].parts[0].id == "talk-3"
    assert set(longform_entries(utts, max_gap_s=10.0)) >= set()  # a wider gap joins all three
    assert "talk" in {u.id for u in longform_entries(utts, max_gap_s=10.0)}
    path = corpus["tmp"] / "long.jsonl"
    write_manifest(path, list(long.values()))
    assert {u.id: u.parts for u in read_manifest(path)} == {k: v.parts for k, v in long.items()}


def test_export_then_import_gives_the_same_utterances(corpus):
    utts, _ = import_supervisions(corpus["recs"], corpus["sups"])
    key = lambda u: (u.id, u.audio_filepath, u.offset, u.duration, u.text, u.speaker, u.parts)  # noqa: E731
    long = longform_entries(utts)  # its parts travel in the supervisions' custom field
    long_paths = export_lhotse(long, corpus["tmp"] / "lhotse", "test_long")
    assert sorted(map(key, import_supervisions(*long_paths)[0])) == sorted(map(key, long))
    rec_path, sup_path = export_lhotse(utts, corpus["tmp"] / "lhotse", "test")
    assert rec_path.name == "test_recordings.jsonl.gz" and sup_path.name == "test_supervisions.jsonl.gz"
    again, _ = import_supervisions(rec_path, sup_path)
    assert sorted(map(key, again)) == sorted(map(key, utts))
    sups = [json.loads(line) for line in gzip.decompress(sup_path.read_bytes()).decode().splitlines()]
    call = next(s for s in sups if s["id"] == "call-1")
    assert call["channel"] == [0, 1] and call["recording_id"] == "call"
    assert export_lhotse(utts, corpus["tmp"] / "lhotse2", "test")[1].read_bytes() == sup_path.read_bytes()


def test_a_cut_s_supervision_starts_relative_to_its_cut(corpus):
    rec = corpus["rec_objs"][0]
    sup = _sup("talk-2", "talk", 0.0, 3.5, "how are you", speaker="ann")  # trimmed cut: relative start 0
    cuts = [{"id": "talk-2", "start": 4.5, "duration": 3.5, "channel": 0, "supervisions": [sup],
             "recording": rec, "type": "MonoCut"},
            {"id": "talk-0", "start": 0, "duration": 20.0, "channel": 0, "recording": rec, "type": "MonoCut",
             "supervisions": [dict(sup, start=4.5)]},   # the same supervision in a whole-recording cut
            {"id": "empty", "start": 0, "duration": 1.0, "channel": 0, "supervisions": [], "recording": rec,
             "type": "MonoCut"}]
    utts, _ = import_cuts(_jsonl(corpus["tmp"] / "cuts.jsonl.gz", cuts))
    assert [(u.id, u.offset, u.duration) for u in utts] == [("talk-2", 4.5, 3.5)]  # once, at 4.5 s
    mixed = _jsonl(corpus["tmp"] / "mixed.jsonl", [{"id": "m", "type": "MixedCut", "tracks": []}])
    with pytest.raises(LhotseManifestError, match=r"mixed\.jsonl:1: a MixedCut"):
        import_cuts(mixed)
    clash = _jsonl(corpus["tmp"] / "clash.jsonl", [cuts[0], dict(cuts[1], supervisions=[dict(sup, start=5.0)])])
    with pytest.raises(LhotseManifestError, match=r"clash\.jsonl:2: supervision id 'talk-2' again"):
        import_cuts(clash)


def test_the_command_line_imports_and_exports(corpus, capsys):
    out, long = corpus["tmp"] / "m" / "test.jsonl", corpus["tmp"] / "m" / "test_talks.jsonl"
    assert main(["import", "--recordings", str(corpus["recs"]), "--supervisions", str(corpus["sups"]),
                 "--out", str(out), "--longform", str(long)]) == 0
    assert len(read_manifest(out)) == 5 and all(u.parts for u in read_manifest(long))
    assert main(["export", str(out), "--out", str(corpus["tmp"] / "lh")]) == 0
    assert (corpus["tmp"] / "lh" / "test_supervisions.jsonl.gz").is_file()
    capsys.readouterr()
    bad = _jsonl(corpus["tmp"] / "bad.jsonl", [_sup("x", "nope", 1.0, 1.0, "who")])
    assert main(["import", "--recordings", str(corpus["recs"]), "--supervisions", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.jsonl:1" in err and len(err.strip().splitlines()) == 1


def test_lhotse_itself_reads_our_export_and_its_cuts_import_as_its_supervisions(corpus):
    lhotse = pytest.importorskip("lhotse")
    from lhotse.qa import validate_recordings_and_supervisions

    utts, _ = import_supervisions(corpus["recs"], corpus["sups"])
    rec_path, sup_path = export_lhotse(utts, corpus["tmp"] / "lhotse", "test")
    recs, sups = lhotse.load_manifest(rec_path), lhotse.load_manifest(sup_path)
    validate_recordings_and_supervisions(recs, sups)  # lhotse's own checks of our files
    rec_of = recording_ids(utts)
    assert {s.id: (s.recording_id, s.start, s.duration, s.text, s.speaker) for s in sups} == {
        u.id: (rec_of[u.id], u.offset, u.duration, u.text, u.speaker) for u in utts}
    assert {r.id: r.num_channels for r in recs} == {rec_of["talk-1"]: 1, rec_of["call-1"]: 2, rec_of["array-1"]: 1}
    # lhotse's cuts of lhotse's reading of the original manifests, trimmed to supervisions and not
    orig_recs, orig_sups = lhotse.load_manifest(corpus["recs"]), lhotse.load_manifest(corpus["sups"])
    cuts = lhotse.CutSet.from_manifests(recordings=orig_recs, supervisions=orig_sups)
    for name, cutset in (("whole", cuts), ("trimmed", cuts.trim_to_supervisions(keep_overlapping=False))):
        path = corpus["tmp"] / f"cuts_{name}.jsonl.gz"
        cutset.to_file(path)
        from_cuts, _ = import_cuts(path)
        key = lambda u: (u.id, u.audio_filepath, round(u.offset, 6), u.duration, u.text, u.speaker)  # noqa: E731
        assert sorted(map(key, from_cuts)) == sorted(map(key, utts)), name
