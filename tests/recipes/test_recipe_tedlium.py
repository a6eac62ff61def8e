"""TED-LIUM 3 preparation on fixture trees in the official layout (NIST SPHERE + STM, no network).

The fixture STM files have the official line kinds (tests/recipes/fixtures.py): scored speech
with the speaker's name and ``<o,f0,male>``-style labels, ``inter_segment_gap`` lines between
segments, an own-speaker ``ignore_time_segment_in_scoring`` line, and a test talk over 80 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from asr_pe.data import tedlium
from asr_pe.data.audio import load_audio
from asr_pe.data.download import ChecksumError
from asr_pe.data.manifest import read_manifest
from asr_pe.data.tedlium import (
    TedliumError,
    describe_talk_set,
    normalize_tedlium_text,
    parse_stm,
    prepare_tedlium,
    tedlium_manifests,
)


@pytest.mark.parametrize(
    "raw,norm",
    [
        ("it 's a <unk> truly great honor", "it's a truly great honor"),
        ("we don 't know what(2) they 're doing", "we don't know what they're doing"),
        ("And That 's It {NOISE} [BREATH] <sil>", "and that's it"),
        ("'cause i said so", "'cause i said so"),  # nothing before the apostrophe: kept
        ("hello world (AlGore_2009-12)", "hello world"),  # TED-LIUM 1 utterance name dropped
        ("<unk>", ""),
        ("  spaced   out  ", "spaced out"),
    ],
)
def test_text_normalisation(raw, norm):
    assert normalize_tedlium_text(raw) == norm


def _check(got, want):
    assert [u.id for u in got] == [w.id for w in want]
    assert [u.text for u in got] == [w.text for w in want]
    assert [u.speaker for u in got] == [w.speaker for w in want]
    assert [u.offset for u in got] == pytest.approx([w.offset for w in want], abs=1e-9)
    assert [u.duration for u in got] == pytest.approx([w.duration for w in want], abs=1e-6)


def _corpus(tmp_path):
    return tmp_path / "c" / "TEDLIUM_release-3"


def _stm_path(tmp_path, split="dev", talk="AlexSmith_2009"):
    return _corpus(tmp_path) / "legacy" / split / "stm" / f"{talk}.stm"


def test_prepare_legacy_segments_talks_and_counts(build, tmp_path):
    expected = build.make_tedlium_tree(tmp_path / "c")
    result = prepare_tedlium(tmp_path / "c", tmp_path / "m")
    assert set(result) == {"train", "dev", "test"}
    for split, exp in expected.items():
        segs = read_manifest(tmp_path / "m" / f"{split}.jsonl")
        talks = read_manifest(tmp_path / "m" / f"{split}_talks.jsonl")
        _check(segs, exp["segments"])
        _check(talks, exp["talks"])
        stats = json.loads((tmp_path / "m" / f"{split}.stats.json").read_text())
        assert stats == result[split]["stats"]
        assert stats["inter_segment_gaps"] == exp["inter_segment_gaps"] > 0
        assert stats["unscored_speech_segments"] == exp["unscored_speech_segments"]
        assert stats["empty_after_normalisation"] == exp["empty"]
        assert stats["talks_split_at_unscored_speech"] == exp["talks_split"]
        assert stats["segments"] == len(exp["segments"]) and stats["full_talks"] == len(exp["talks"])
        # dev/test audio is in legacy/<split>/; legacy/train's links resolve into data/
        folder = "data" if split == "train" else f"legacy/{split}"
        for u in segs + talks:
            assert u.audio_filepath == str(_corpus(tmp_path).resolve() / folder / "sph" / f"{u.speaker}.sph")


def test_gap_lines_keep_talks_and_own_speaker_speech_cuts_them(build, tmp_path):
    """The official dev/test STM files have inter_segment_gap lines between segments: every talk
    must have a full-talk entry (they were all dropped when gap lines counted as speech)."""
    build.make_tedlium_tree(tmp_path / "c")
    result = prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["dev", "test"])
    dev = read_manifest(tmp_path / "m" / "dev.jsonl")
    assert [u.id for u in dev] == [
        "AlexSmith_2009-0000310-0000980",
        "AlexSmith_2009-0000980-0001525",
        "AlexSmith_2009-0001602-0002450",
        "AlexSmith_2009-0002510-0003372",
        "AlexSmith_2009-0003372-0003940",
        "MariaLopez_2010-0000150-0000820",  # 8.90-12.40 is "<unk>" only: not a segment
        "MariaLopez_2010-0001240-0001800",
        "MariaLopez_2010-0002430-0003090",
        "MariaLopez_2010-0003140-0003520",
    ]
    assert dev[1].text == "we don't know what they're doing with the climate" and dev[1].offset == 9.8
    talks = read_manifest(tmp_path / "m" / "dev_talks.jsonl")
    # AlexSmith: 4 gap lines, no unscored speech -> one entry from the first start to the last end.
    # MariaLopez: its own speaker's ignore line at 18.0-24.3 s cuts it; the <unk> segment does not.
    assert [(t.id, t.offset, t.duration) for t in talks] == [
        ("AlexSmith_2009", 3.1, pytest.approx(36.3)),
        ("MariaLopez_2010-part1", 1.5, pytest.approx(16.5)),
        ("MariaLopez_2010-part2", 24.3, pytest.approx(10.9)),
    ]
    assert talks[1].text == "i'm going to talk today about music and about the people who make it"
    assert talks[2].text == "that was a song from my grandmother's village thank you"
    # each talk lists its segments (ids of dev.jsonl) with their spans relative to the talk's start,
    # so the talk decoded whole can be scored against the same segments decoded alone
    segments = {u.id: u for u in dev}
    for talk in talks:
        assert talk.text == " ".join(segments[p.id].text for p in talk.parts)
        for p in talk.parts:
            assert p.start == pytest.approx(segments[p.id].offset - talk.offset, abs=1e-6)
            assert p.end - p.start == pytest.approx(segments[p.id].duration, abs=1e-6)
        assert talk.parts[-1].end == pytest.approx(talk.duration, abs=1e-6)
    # what the stage-2 log says the set holds: a reader learns that two entries are parts
    assert describe_talk_set("dev_talks", talks) == (
        "dev_talks: 3 entries = 1 whole talks (36.3-36.3 s) + 2 parts of 1 talk(s) cut at unscored speech "
        "(10.9-16.5 s)")
    stats = result["dev"]["stats"]
    assert (stats["inter_segment_gaps"], stats["unscored_speech_segments"], stats["empty_after_normalisation"]) == (
        8, 1, 1)
    assert stats["talks_split_at_unscored_speech"] == 1 and stats["segments_overlapping_unscored_speech"] == 0
    test_talks = read_manifest(tmp_path / "m" / "test_talks.jsonl")
    assert [t.id for t in test_talks] == ["DavidChen_2010", "SaraJones_2012"]
    assert test_talks[0].duration == pytest.approx(88.6) and test_talks[0].duration > 80
    assert len(test_talks[0].text.split()) == sum(
        len(u.text.split()) for u in read_manifest(tmp_path / "m" / "test.jsonl") if u.speaker == "DavidChen_2010")


def _write_talk(tmp_path, lines: list[str], seconds: float = 30.0, talk: str = "Solo_2011"):
    """One dev talk with the given STM lines (plus the fixture's other dev talk untouched)."""
    sph_dir, stm_dir = _corpus(tmp_path) / "legacy" / "dev" / "sph", _corpus(tmp_path) / "legacy" / "dev" / "stm"
    sf.write(sph_dir / f"{talk}.sph", [0.1] * int(seconds * 16000), 16000, format="NIST", subtype="PCM_16")
    (stm_dir / f"{talk}.stm").write_text("".join(f"{talk} 1 {line}\n" for line in lines))


def test_which_ignore_lines_cut_a_talk(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c", {"dev": {}})
    _write_talk(tmp_path, [
        "Solo 0 2 <o,f0,male> ignore_time_segment_in_scoring",  # own speaker, before the first segment
        "Solo 2 6 <o,f0,male> one two",
        "INTER_SEGMENT_GAP 6 7 <o,,unknown> ignore_time_segment_in_scoring",  # a gap, whatever the case
        "Solo 7 11 <o,f0,male> three four",
        "excluded_region 11 13 <o,,unknown> ignore_time_segment_in_scoring",  # untranscribed: cuts
        "Solo 13 17 <o,f0,male> five six",
        "Solo 16 20 <o,f0,male> seven eight",  # overlaps the unscored line below: not in the talk set
        "Solo 18 19 <o,f0,male> ignore_time_segment_in_scoring",
        "Solo 21 25 <o,f0,male> nine ten",
        "Solo 25 28 <o,f0,male> ignore_time_segment_in_scoring",  # after the last segment: no cut
    ])
    result = prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["dev"])
    assert [u.text for u in read_manifest(tmp_path / "m" / "dev.jsonl")] == [
        "one two", "three four", "five six", "seven eight", "nine ten"]
    talks = read_manifest(tmp_path / "m" / "dev_talks.jsonl")
    assert [(t.id, t.offset, t.duration, t.text) for t in talks] == [
        ("Solo_2011-part1", 2.0, 9.0, "one two three four"),
        ("Solo_2011-part2", 13.0, 4.0, "five six"),
        ("Solo_2011-part3", 21.0, 4.0, "nine ten"),
    ]
    stats = result["dev"]["stats"]
    assert stats["inter_segment_gaps"] == 1 and stats["unscored_speech_segments"] == 4
    assert stats["segments_overlapping_unscored_speech"] == 1 and stats["talks_split_at_unscored_speech"] == 1


def test_segments_read_the_right_samples_from_sph(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"])
    seg = read_manifest(tmp_path / "m" / "test.jsonl")[3]
    wave = load_audio(seg.audio_filepath, offset=seg.offset, duration=seg.duration)
    assert wave.shape == (round(seg.duration * 16000),)
    full, sr = sf.read(seg.audio_filepath, dtype="float32")
    start = round(seg.offset * sr)
    assert wave.numpy() == pytest.approx(full[start : start + wave.shape[0]], abs=1e-6)


def test_legacy_train_is_the_data_folder_and_full_subset_gives_the_same_manifests(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    prepare_tedlium(tmp_path / "c", tmp_path / "legacy", splits=["train", "dev"])
    prepare_tedlium(_corpus(tmp_path), tmp_path / "full", subset="full", splits=["train", "dev"])
    for name in ("train.jsonl", "train_talks.jsonl", "dev.jsonl"):
        assert (tmp_path / "legacy" / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name
    assert all("/TEDLIUM_release-3/data/sph/" in u.audio_filepath
               for u in read_manifest(tmp_path / "full" / "train.jsonl"))


def test_missing_legacy_train_links_name_the_cause_and_full_still_works(build, tmp_path):
    expected = build.make_tedlium_tree(tmp_path / "c", legacy_train_links=False)
    with pytest.raises(TedliumError, match=r"legacy/train: expected sph/ and stm/ folders \(it holds links to data/"
                                           r", which this extraction lacks: use --subset full"):
        prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["train"])
    prepare_tedlium(tmp_path / "c", tmp_path / "m", subset="full", splits=["train"])
    _check(read_manifest(tmp_path / "m" / "train.jsonl"), expected["train"]["segments"])
    # a link whose target is gone: the error names the link, its target and the way out
    build.make_tedlium_tree(tmp_path / "d")
    (tmp_path / "d" / "TEDLIUM_release-3" / "data" / "sph" / "KimLee_2016.sph").unlink()
    with pytest.raises(TedliumError, match=r"KimLee_2016.sph is a link to \.\./\.\./\.\./data/sph/KimLee_2016.sph, "
                                           r"which does not exist.*--subset full"):
        prepare_tedlium(tmp_path / "d", tmp_path / "m2", splits=["train"])


@pytest.mark.parametrize(
    "bad_line,reason",
    [
        ("AlexSmith_2009 1 AlexSmith 43.00\n", "expected '<talk>"),
        ("AlexSmith_2009 1 AlexSmith abc 44.0 <o,f0,male> words\n", "not numbers"),
        ("AlexSmith_2009 1 AlexSmith 44.0 43.0 <o,f0,male> words\n", "bad segment times"),
        ("AlexSmith_2009 1 AlexSmith 43.0 44.0 o,f0,male words\n", "label"),
        ("OtherTalk 1 OtherTalk 43.0 44.0 <o,f0,male> words\n", "does not match the file name"),
    ],
)
def test_bad_stm_line_names_file_and_line(build, tmp_path, bad_line, reason):
    build.make_tedlium_tree(tmp_path / "c")
    stm = _stm_path(tmp_path)
    text = stm.read_text()
    stm.write_text(text + bad_line)
    line_no = text.count("\n") + 1
    with pytest.raises(TedliumError, match=reason) as info:
        prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["dev"])
    assert f"{stm}:{line_no}:" in str(info.value)
    assert not (tmp_path / "m" / "dev.jsonl").exists()


def test_parse_stm_keeps_raw_lines_and_skips_an_sclite_header(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    stm = _stm_path(tmp_path, talk="MariaLopez_2010")
    segs = parse_stm(stm)
    assert len(segs) == 10 and segs[0].is_gap and segs[0].ignored
    assert segs[1].transcript == "i 'm going to talk today about music" and segs[1].label == "<o,f0,female>"
    assert segs[1].speaker == "MariaLopez" and not segs[1].is_gap and segs[1].source == f"{stm}:2"
    assert segs[5].ignored and not segs[5].is_gap  # the song: unscored speech of the talk's speaker
    # The header Kaldi's prepare_data.sh writes for sclite: ';;' lines are comments.
    stm.write_text(';;\n;; LABEL "o" "Overall" "Overall results"\n;; LABEL "male" "Male" "Male Talkers"\n;;\n'
                   + stm.read_text())
    again = parse_stm(stm)
    assert [s.transcript for s in again] == [s.transcript for s in segs] and again[1].source == f"{stm}:6"


def test_missing_sph_and_segments_past_the_audio(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    stm = _stm_path(tmp_path, "test", "SaraJones_2012")
    # audio is 20.0 s: one segment starts after it (skipped), one overruns it (clipped)
    stm.write_text(
        stm.read_text()
        + "SaraJones_2012 1 SaraJones 19.90 20.40 <o,f0,female> overrun end\n"
        + "SaraJones_2012 1 SaraJones 21.00 22.00 <o,f0,female> past the end\n"
    )
    result = prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"])
    stats = result["test"]["stats"]
    assert stats["past_end_of_audio"] == 1 and stats["clipped_to_audio_end"] == 1
    last = read_manifest(tmp_path / "m" / "test.jsonl")[-1]
    assert last.text == "overrun end" and last.offset + last.duration == pytest.approx(20.0)
    (_corpus(tmp_path) / "legacy" / "dev" / "sph" / "AlexSmith_2009.sph").unlink()
    with pytest.raises(TedliumError, match="audio file missing"):
        prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["dev"])


def test_a_split_without_scored_speech_is_an_error_not_an_empty_manifest(build, tmp_path, capsys):
    build.make_tedlium_tree(tmp_path / "c", {"dev": {}})
    _write_talk(tmp_path, ["inter_segment_gap 0 3 <o,,unknown> ignore_time_segment_in_scoring",
                           "Solo 3 9 <o,f0,male> ignore_time_segment_in_scoring",
                           "Solo 9 12 <o,f0,male> <unk> {NOISE}"])
    stm_dir = _corpus(tmp_path) / "legacy" / "dev" / "stm"
    with pytest.raises(TedliumError) as info:
        prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["dev"])
    assert str(info.value) == (
        f"{stm_dir}: no scored segment in any of its .stm files (1 inter_segment_gap lines, 1 unscored-speech "
        "lines, 1 empty after normalisation, 0 past the end of the audio, 0 zero length); dev manifests not written"
    )
    assert not list((tmp_path / "m").iterdir())
    # the recipe's CLI prints that one line, no traceback
    code = tedlium.main(["prepare", "--corpus-dir", str(tmp_path / "c"), "--out-dir", str(tmp_path / "m"),
                         "--splits", "dev"])
    err = capsys.readouterr().err
    assert code == 2 and f"error: {stm_dir}: no scored segment" in err and "Traceback" not in err


def test_tedlium_manifests_shape_missing_and_empty(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    m = tmp_path / "m"
    prepare_tedlium(tmp_path / "c", m)
    got = tedlium_manifests(m)
    assert got == {
        "train": [str(m / "train.jsonl")],
        "dev": [str(m / "dev.jsonl")],
        "test": {name: str(m / f"{name}.jsonl") for name in ("dev", "test", "dev_talks", "test_talks")},
    }
    with pytest.raises(FileNotFoundError, match=r"run recipes/tedlium3/run.sh --stage 1 --stop_stage 2 first"):
        tedlium_manifests(m, test=["test_long_60s"])
    (m / "test_talks.jsonl").write_text("\n")
    with pytest.raises(TedliumError, match=rf"^{m / 'test_talks.jsonl'}: manifest is empty; run recipes/tedlium3"):
        tedlium_manifests(m)


def _texts(manifest) -> str:
    return " | ".join(u.text for u in read_manifest(manifest))


def test_prepare_is_resumable_and_redoes_empty_or_outdated_splits(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    m = tmp_path / "m"
    prepare_tedlium(tmp_path / "c", m, splits=["test"])
    manifest = m / "test.jsonl"
    manifest.write_text(manifest.read_text().replace("hello world", "kept as is"))
    prepare_tedlium(tmp_path / "c", m, splits=["test"])  # skipped
    assert "kept as is" in _texts(manifest)
    prepare_tedlium(tmp_path / "c", m, splits=["test"], overwrite=True)
    assert "hello world" in _texts(manifest) and "kept as is" not in _texts(manifest)
    # An empty talks manifest (what the older preparation wrote for every official dev/test
    # set) is prepared again, not reused.
    (m / "test_talks.jsonl").write_text("")
    result = prepare_tedlium(tmp_path / "c", m, splits=["test"])
    assert [t.id for t in read_manifest(m / "test_talks.jsonl")] == ["DavidChen_2010", "SaraJones_2012"]
    assert result["test"]["stats"]["full_talks"] == 2
    # Stats written by an older preparation (no prepare_version): prepared again.
    stats = json.loads((m / "test.stats.json").read_text())
    del stats["prepare_version"]
    (m / "test.stats.json").write_text(json.dumps(stats))
    manifest.write_text(manifest.read_text().replace("hello world", "stale"))
    prepare_tedlium(tmp_path / "c", m, splits=["test"])
    assert "hello world" in _texts(manifest) and "stale" not in _texts(manifest)
    assert json.loads((m / "test.stats.json").read_text())["prepare_version"] == tedlium.PREPARE_VERSION


def test_download_extract_prepare_from_an_official_layout_archive(build, tmp_path, http_server, monkeypatch):
    """Stage 0-2 code path: the archive (legacy/train as links into data/) served over HTTP."""
    expected = build.make_tedlium_tree(tmp_path / "src")
    body = build.make_tedlium_archive(tmp_path / "src", tmp_path / "dl").read_bytes()
    http_server.files["/resources/51/TEDLIUM_release-3.tgz"] = body
    monkeypatch.setattr(tedlium, "TEDLIUM_SHA256", hashlib.sha256(body).hexdigest())
    root = tmp_path / "archives"
    tedlium.download_tedlium(root, http_server.url("/resources/51"), retries=1, backoff=0.0)
    corpus = tedlium.extract_tedlium(root)
    assert (corpus / "legacy" / "train" / "sph" / "KimLee_2016.sph").is_symlink()
    prepare_tedlium(root, tmp_path / "m")
    for split in ("train", "dev", "test"):
        _check(read_manifest(tmp_path / "m" / f"{split}.jsonl"), expected[split]["segments"])
        _check(read_manifest(tmp_path / "m" / f"{split}_talks.jsonl"), expected[split]["talks"])
    # a corrupted download is refused by the checksum, naming the archive
    http_server.files["/resources/51/TEDLIUM_release-3.tgz"] = body[:-10] + b"0123456789"
    with pytest.raises(ChecksumError, match=r"TEDLIUM_release-3.tgz: sha256 checksum mismatch"):
        tedlium.download_tedlium(tmp_path / "again", http_server.url("/resources/51"), retries=1, backoff=0.0)


RUN_SH = Path(__file__).resolve().parents[2] / "recipes" / "tedlium3" / "run.sh"
# Records its arguments; `python -c` (recipes/python.sh's check) goes to the real interpreter;
# make_longform.py --out <manifest> gets one line, as the real script would write.
FAKE_PYTHON = f"""#!/usr/bin/env bash
[ "$1" = -c ] && exec {sys.executable} "$@"
printf '%s\\n' "$*" >> "$FAKE_LOG"
prev=; for a in "$@"; do case "$prev $a" in "--out "*.jsonl) echo '{{}}' > "$a" ;; esac; prev=$a; done
"""


def test_run_sh_rebuilds_empty_long_form_sets_and_refuses_to_evaluate_empty_manifests(tmp_path):
    exe, log = tmp_path / "fake_python", tmp_path / "calls.log"
    exe.write_text(FAKE_PYTHON)
    exe.chmod(0o755)
    work = tmp_path / "work"
    md = work / "manifests"
    md.mkdir(parents=True)
    line = '{"audio_filepath": "a.sph", "duration": 1.0, "text": "a"}\n'
    for name in ("dev", "test", "dev_talks", "test_long"):
        (md / f"{name}.jsonl").write_text(line)
    (md / "dev_long.jsonl").write_text("")  # left by an interrupted stage 3
    (md / "test_talks.jsonl").write_text("\n")  # left by the older preparation
    (work / "runs" / "cape").mkdir(parents=True)

    def run(*args):
        env = {**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)}
        return subprocess.run(["bash", str(RUN_SH), "--work_dir", str(work), "--pes", "cape", *args],
                              capture_output=True, text=True, env=env, timeout=60)

    done = run("--stage", "3", "--stop_stage", "3")
    assert done.returncode == 0, done.stderr
    made = [c for c in log.read_text().splitlines() if "make_longform.py" in c]
    assert len(made) == 1 and f"--out {md}/dev_long.jsonl" in made[0]  # test_long was kept
    failed = run("--stage", "5", "--stop_stage", "5")
    assert failed.returncode == 1
    assert f"{md}/test_talks.jsonl is empty; run --stage 2 --stop_stage 3 again" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert not [c for c in log.read_text().splitlines() if "evaluate.py" in c]
