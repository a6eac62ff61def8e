"""TED-LIUM 3 preparation on a fixture tree in the official layout (NIST SPHERE + STM, no network)."""

from __future__ import annotations

import json

import pytest

from asr_pe.data.audio import load_audio
from asr_pe.data.manifest import read_manifest
from asr_pe.data.tedlium import (
    TedliumError,
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
        assert stats["ignored_segments"] == exp["ignored"]
        assert stats["empty_after_normalisation"] == exp["empty"]
        assert stats["talks_with_unscored_speech"] == exp["talks_with_unscored_speech"]
        assert stats["segments"] == len(exp["segments"]) and stats["full_talks"] == len(exp["talks"])
        for u in segs + talks:
            assert u.audio_filepath.endswith(f"/legacy/{split}/sph/{u.speaker}.sph")
    dev = read_manifest(tmp_path / "m" / "dev.jsonl")
    # Spelled out for the dev split: 2 ignore segments + 1 in BillGates, 1 <unk>-only segment.
    assert [u.id for u in dev] == [
        "AlGore_2009-0000120-0000350",
        "AlGore_2009-0000360-0000600",
        "BillGates_2010-0000050-0000200",
        "BillGates_2010-0000300-0000500",
        "BillGates_2010-0000550-0000750",
    ]
    assert dev[1].text == "we don't know what they're doing" and dev[1].offset == 3.6
    assert result["dev"]["stats"]["ignored_segments"] == 3
    assert result["dev"]["stats"]["empty_after_normalisation"] == 1
    talks = read_manifest(tmp_path / "m" / "dev_talks.jsonl")
    # only AlGore: BillGates has an ignored segment inside its scored span
    assert [(t.id, t.offset, t.duration) for t in talks] == [("AlGore_2009", 1.2, pytest.approx(4.8))]
    assert talks[0].text == "it's a truly great honor we don't know what they're doing"
    assert result["dev"]["stats"]["talks_with_unscored_speech"] == 1


def test_segments_read_the_right_samples_from_sph(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"])
    seg = read_manifest(tmp_path / "m" / "test.jsonl")[1]
    wave = load_audio(seg.audio_filepath, offset=seg.offset, duration=seg.duration)
    assert wave.shape == (round(seg.duration * 16000),)
    import soundfile as sf

    full, sr = sf.read(seg.audio_filepath, dtype="float32")
    start = round(seg.offset * sr)
    assert wave.numpy() == pytest.approx(full[start : start + wave.shape[0]], abs=1e-6)


def test_full_subset_reads_train_from_data_folder(build, tmp_path):
    layout = build.TEDLIUM_LAYOUT
    build.make_tedlium_tree(tmp_path / "c", {"dev": layout["dev"], "test": layout["test"]})
    exp = build.make_tedlium_tree(tmp_path / "c", {"train": layout["train"]}, base="data")
    prepare_tedlium(tmp_path / "c" / "TEDLIUM_release-3", tmp_path / "m", subset="full")
    train = read_manifest(tmp_path / "m" / "train.jsonl")
    _check(train, exp["train"]["segments"])
    assert all("/TEDLIUM_release-3/data/sph/" in u.audio_filepath for u in train)
    assert read_manifest(tmp_path / "m" / "dev.jsonl")[0].audio_filepath.endswith("/legacy/dev/sph/AlGore_2009.sph")


def _stm_path(tmp_path, split="dev", talk="AlGore_2009"):
    return tmp_path / "c" / "TEDLIUM_release-3" / "legacy" / split / "stm" / f"{talk}.stm"


@pytest.mark.parametrize(
    "bad_line,reason",
    [
        ("AlGore_2009 1 AlGore_2009 7.00\n", "expected '<talk>"),
        ("AlGore_2009 1 AlGore_2009 abc 8.0 <o,f0,male> words\n", "not numbers"),
        ("AlGore_2009 1 AlGore_2009 8.0 7.0 <o,f0,male> words\n", "bad segment times"),
        ("AlGore_2009 1 AlGore_2009 7.0 8.0 o,f0,male words\n", "label"),
        ("OtherTalk 1 OtherTalk 7.0 8.0 <o,f0,male> words\n", "does not match the file name"),
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


def test_parse_stm_skips_comments_and_keeps_raw_transcripts(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    segs = parse_stm(_stm_path(tmp_path))
    assert len(segs) == 4 and segs[0].ignored and not segs[1].ignored
    assert segs[1].transcript == "it 's a <unk> truly great honor" and segs[1].label == "<o,f0,male>"
    assert segs[1].source == f"{_stm_path(tmp_path)}:3"  # line 1 is the ';;' comment


def test_missing_sph_and_segments_past_the_audio(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    stm = _stm_path(tmp_path, "test", "JaneDoe_2012")
    # audio is 5.0 s: one segment starts after it (skipped), one overruns it (clipped)
    stm.write_text(
        stm.read_text()
        + "JaneDoe_2012 1 JaneDoe_2012 4.90 5.40 <o,f0,female> overrun end\n"
        + "JaneDoe_2012 1 JaneDoe_2012 6.00 7.00 <o,f0,female> past the end\n"
    )
    result = prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"])
    stats = result["test"]["stats"]
    assert stats["past_end_of_audio"] == 1 and stats["clipped_to_audio_end"] == 1
    last = read_manifest(tmp_path / "m" / "test.jsonl")[-1]
    assert last.text == "overrun end" and last.offset + last.duration == pytest.approx(5.0)
    (tmp_path / "c" / "TEDLIUM_release-3" / "legacy" / "dev" / "sph" / "AlGore_2009.sph").unlink()
    with pytest.raises(TedliumError, match="audio file missing"):
        prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["dev"])


def test_tedlium_manifests_shape_and_missing_message(build, tmp_path):
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


def test_prepare_is_resumable(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"])
    manifest = tmp_path / "m" / "test.jsonl"
    manifest.write_text(manifest.read_text().replace("hello world", "kept as is"))
    prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"])  # skipped
    assert read_manifest(manifest)[0].text == "kept as is"
    prepare_tedlium(tmp_path / "c", tmp_path / "m", splits=["test"], overwrite=True)
    assert read_manifest(manifest)[0].text == "hello world"
