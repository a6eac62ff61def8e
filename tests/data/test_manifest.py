"""Manifest reading: parsing, path resolution, every validation error with file:line, skips."""

import json
import logging
import os

import pytest

from asr_pe.data.manifest import (
    ManifestError,
    Utterance,
    default_id,
    manifest_stats,
    read_manifest,
    write_manifest,
)


@pytest.fixture()
def corpus(tmp_path, write_audio):
    """A folder with two audio files and a helper writing manifest lines into it."""
    write_audio("audio/a.wav", duration_s=0.5)
    write_audio("audio/b.flac", duration_s=0.5)

    def manifest(*lines, name="m.jsonl"):
        path = tmp_path / name
        path.write_text(
            "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines), encoding="utf-8"
        )
        return path

    return tmp_path, manifest


GOOD = {"audio_filepath": "audio/a.wav", "duration": 0.5, "text": "hello world"}


def test_parses_fields_resolves_relative_paths_and_default_ids(corpus):
    root, manifest = corpus
    path = manifest(
        GOOD,
        "",  # blank lines are ignored
        {"audio_filepath": str(root / "audio/b.flac"), "duration": 0.25, "text": "  two  ", "offset": 0.1,
         "speaker": "spk1"},
        {"audio_filepath": "audio/b.flac", "duration": 0.2, "text": "x", "id": "custom", "speaker": 42},
    )
    utts = read_manifest(path)
    assert [u.id for u in utts] == ["a", "b_0.1", "custom"]
    assert utts[0].audio_filepath == str(root / "audio" / "a.wav")
    assert os.path.isabs(utts[0].audio_filepath)
    assert utts[0].offset == 0.0 and utts[0].speaker is None and utts[0].duration == 0.5
    assert utts[1].text == "two" and utts[1].offset == 0.1 and utts[1].speaker == "spk1"
    assert utts[2].speaker == "42"
    # source names the manifest line (line 2 is blank, so the third record is on line 4)
    assert [u.source for u in utts] == [f"{path}:1", f"{path}:3", f"{path}:4"]


def test_parts_are_kept_and_written_back(corpus, tmp_path):
    """A long-form row's ``parts`` (source ids and spans) survive a read-write-read round trip."""
    _, manifest = corpus
    parts = [{"id": "u1", "start": 0.0, "end": 0.2}, {"id": "u2", "start": 0.25, "end": 0.5}]
    utts = read_manifest(manifest(GOOD | {"id": "rec", "parts": parts}, GOOD | {"id": "plain"}))
    assert [p.to_json() for p in utts[0].parts] == parts and utts[1].parts is None
    out = tmp_path / "out.jsonl"
    write_manifest(out, utts, relative_paths=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["parts"] == parts and "parts" not in rows[1]
    assert read_manifest(out) == utts


def test_default_id_offset_format():
    assert default_id("/x/rec.flac", 0.0) == "rec"
    assert default_id("/x/rec.flac", 12.5) == "rec_12.5"
    assert default_id("/x/rec.flac", 3.0) == "rec_3"


def test_relative_paths_resolve_against_manifest_folder_not_cwd(corpus, tmp_path, monkeypatch):
    _, manifest = corpus
    path = manifest(GOOD)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert read_manifest(path)[0].audio_filepath == str(tmp_path / "audio" / "a.wav")


BAD_LINES = [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ({"duration": 1.0, "text": "a"}, "missing required key(s) audio_filepath"),
    ({**GOOD, "ofset": 1.0}, "unknown key(s) ofset"),
    ({**GOOD, "duration": "1.0"}, "duration must be a finite number"),
    ({**GOOD, "duration": True}, "duration must be a finite number"),
    ({**GOOD, "duration": 0}, "duration must be > 0"),
    ({**GOOD, "duration": -2.0}, "duration must be > 0"),
    ({**GOOD, "offset": -0.5}, "offset must be >= 0"),
    ({**GOOD, "text": "   "}, "text is empty"),
    ({**GOOD, "text": 5}, "text must be a string"),
    ({**GOOD, "audio_filepath": "audio/missing.wav"}, "audio file not found"),
    ({**GOOD, "id": ""}, "id must be a non-empty string"),
    ({**GOOD, "speaker": ["a"]}, "speaker must be a string"),
    ({**GOOD, "parts": []}, "parts must be a non-empty list"),
    ({**GOOD, "parts": [{"id": "u1", "start": 0.0}]}, "exactly the keys id, start, end"),
    ({**GOOD, "parts": [{"id": "u1", "start": 0.3, "end": 0.2}]}, "0 <= start < end"),
    ({**GOOD, "parts": [{"id": "u1", "start": 0.2, "end": 0.3}, {"id": "u2", "start": 0.1, "end": 0.4}]},
     "must be in time order"),
    ({**GOOD, "parts": [{"id": "u1", "start": 0.0, "end": 0.9}]}, "after the recording's duration"),
]


@pytest.mark.parametrize("bad, reason", BAD_LINES, ids=[r for _, r in BAD_LINES])
def test_each_validation_error_names_file_and_line(corpus, bad, reason):
    _, manifest = corpus
    path = manifest(GOOD | {"id": "first"}, "", bad, GOOD | {"id": "last"})
    with pytest.raises(ManifestError) as info:
        read_manifest(path)
    err = info.value
    assert str(err).startswith(f"{path}:3: "), str(err)
    assert reason in str(err)
    assert err.line == 3 and err.path == str(path)
    assert "missing.wav" in str(err) or reason != "audio file not found"


def test_duplicate_id_names_both_lines(corpus):
    _, manifest = corpus
    path = manifest(GOOD, GOOD | {"text": "other"})  # both default to id "a"
    with pytest.raises(ManifestError, match=r":2: duplicate id 'a' \(first used on line 1\)"):
        read_manifest(path)


def test_invalid_utf8_is_a_line_error(corpus, tmp_path):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"text": "\xff\xfe"}\n')
    with pytest.raises(ManifestError, match=r"bin\.jsonl:2: not valid UTF-8"):
        read_manifest(path)


def test_missing_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        read_manifest(tmp_path / "nope.jsonl")


def test_non_strict_skips_counts_and_logs_once(corpus, caplog):
    _, manifest = corpus
    path = manifest(
        GOOD,
        "{broken",
        GOOD | {"id": "b", "duration": 0},
        GOOD | {"id": "c"},
        GOOD,  # duplicate of line 1
        GOOD | {"id": "d", "audio_filepath": "nowhere.wav"},
    )
    with caplog.at_level(logging.WARNING, logger="asr_pe.data.manifest"):
        utts = read_manifest(path, strict=False)
    assert [u.id for u in utts] == ["a", "c"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert "skipped 4 bad line(s), kept 2" in msg
    for line in (2, 3, 5, 6):
        assert f"{path}:{line}:" in msg


def test_write_read_round_trip_is_atomic_and_keeps_ids(tmp_path, write_audio):
    a = write_audio("data/a.wav")
    utts = [
        Utterance("u1", str(a), 0.5, "one two", source="ignored:1"),
        Utterance("u2", str(a), 0.25, "three", offset=0.5, speaker="s"),
    ]
    out = tmp_path / "out" / "m.jsonl"
    write_manifest(out, utts)
    assert read_manifest(out) == utts  # source does not take part in equality
    assert sorted(os.listdir(out.parent)) == ["m.jsonl"]  # no temp file left behind
    records = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert "offset" not in records[0] and "speaker" not in records[0] and "source" not in records[0]
    assert records[1]["offset"] == 0.5

    write_manifest(out, utts, relative_paths=True)
    assert json.loads(out.read_text().splitlines()[0])["audio_filepath"] == os.path.join("..", "data", "a.wav")
    assert read_manifest(out) == utts


def test_write_rejects_duplicate_ids_and_keeps_old_file(tmp_path, write_audio):
    a = str(write_audio("a.wav"))
    out = tmp_path / "m.jsonl"
    write_manifest(out, [Utterance("x", a, 1.0, "t")])
    before = out.read_bytes()
    with pytest.raises(ValueError, match="duplicate utterance id 'y'"):
        write_manifest(out, [Utterance("y", a, 1.0, "t"), Utterance("y", a, 1.0, "u")])
    assert out.read_bytes() == before


def test_source_excluded_from_equality_and_hash():
    u1 = Utterance("i", "/a.wav", 1.0, "t", source="m:1")
    u2 = Utterance("i", "/a.wav", 1.0, "t", source="n:7")
    assert u1 == u2 and hash(u1) == hash(u2)


def test_manifest_stats():
    utts = [Utterance(str(i), "/a.wav", d, "t") for i, d in enumerate([1.0, 2.0, 3600.0 - 3.0])]
    stats = manifest_stats(utts)
    assert stats["count"] == 3
    assert stats["hours"] == pytest.approx(1.0)
    assert stats["min_duration"] == 1.0 and stats["max_duration"] == 3597.0
    assert stats["mean_duration"] == pytest.approx(1200.0)
    assert manifest_stats([])["count"] == 0
