"""LibriSpeech preparation on a fixture tree in the official layout (no network)."""

from __future__ import annotations

import json
import os

import pytest

from asr_pe.data.download import ChecksumError
from asr_pe.data.librispeech import (
    LIBRISPEECH_ARCHIVES,
    LIBRISPEECH_PARTS,
    LibriSpeechError,
    download_librispeech,
    extract_librispeech,
    librispeech_manifests,
    main,
    prepare_librispeech,
)
from asr_pe.data.manifest import read_manifest


def test_archive_table_covers_the_seven_parts_with_well_formed_checksums():
    assert set(LIBRISPEECH_PARTS) == {
        "train-clean-100", "train-clean-360", "train-other-500", "dev-clean", "dev-other", "test-clean", "test-other",
    }
    for part, arch in LIBRISPEECH_ARCHIVES.items():
        assert arch.filename == f"{part}.tar.gz"
        assert arch.md5 is None or (len(arch.md5) == 32 and int(arch.md5, 16) >= 0)
        assert arch.sha256 is None or (len(arch.sha256) == 64 and int(arch.sha256, 16) >= 0)


def test_prepare_writes_expected_manifests(build, tmp_path):
    expected = build.make_librispeech_tree(tmp_path / "corpus")
    written = prepare_librispeech(tmp_path / "corpus", tmp_path / "manifests", ["dev-clean", "test-clean"])
    assert written == {p: tmp_path / "manifests" / f"{p}.jsonl" for p in ("dev-clean", "test-clean")}
    for part, utts in expected.items():
        got = read_manifest(written[part])
        # chapter order: speaker 84 before 174 (numeric), utterances 0000, 0001, 0002
        assert [u.id for u in got] == [e.id for e in utts]
        assert [u.text for u in got] == [e.text for e in utts]
        assert [u.speaker for u in got] == [e.speaker for e in utts]
        assert [u.duration for u in got] == pytest.approx([e.num_samples / 16000 for e in utts], abs=1e-6)
        assert all(u.offset == 0.0 for u in got)
        for u in got:
            assert os.path.isabs(u.audio_filepath) and u.audio_filepath.endswith(f"/{u.id}.flac")
    dev = read_manifest(written["dev-clean"])
    assert dev[0].id == "84-121123-0000" and dev[0].text == "go do you hear"
    assert dev[2].text == "i don't know said he"  # apostrophe kept, double space collapsed
    assert dev[-1].id == "174-50561-0001" and dev[-1].speaker == "174-50561"


def test_prepare_accepts_the_librispeech_folder_itself_and_skips_existing(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    out = tmp_path / "m"
    prepare_librispeech(tmp_path / "c" / "LibriSpeech", out, ["test-clean"])
    manifest = out / "test-clean.jsonl"
    manifest.write_text(manifest.read_text() + "")  # keep content, note mtime
    before = manifest.stat().st_mtime_ns
    os.utime(manifest, ns=(before - 10**9, before - 10**9))
    prepare_librispeech(tmp_path / "c", out, ["test-clean"])
    assert manifest.stat().st_mtime_ns == before - 10**9  # untouched: resumable stage
    prepare_librispeech(tmp_path / "c", out, ["test-clean"], overwrite=True)
    assert manifest.stat().st_mtime_ns != before - 10**9


def _trans(tmp_path):
    return tmp_path / "c" / "LibriSpeech" / "dev-clean" / "84" / "121123" / "84-121123.trans.txt"


def test_unparsable_transcript_line_names_file_and_line(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    trans = _trans(tmp_path)
    lines = trans.read_text().splitlines(keepends=True)
    lines.insert(1, "84-121123-0007\n")  # no transcript
    trans.write_text("".join(lines))
    with pytest.raises(LibriSpeechError) as info:
        prepare_librispeech(tmp_path / "c", tmp_path / "m", ["dev-clean"])
    assert str(info.value).startswith(f"{trans}:2: ")
    assert not (tmp_path / "m" / "dev-clean.jsonl").exists()


def test_missing_flac_names_transcript_line_and_audio(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    trans = _trans(tmp_path)
    flac = trans.parent / "84-121123-0001.flac"
    flac.unlink()
    line_no = 1 + [l.split()[0] for l in trans.read_text().splitlines()].index("84-121123-0001")
    with pytest.raises(LibriSpeechError, match="audio file missing") as info:
        prepare_librispeech(tmp_path / "c", tmp_path / "m", ["dev-clean"])
    assert f"{trans}:{line_no}:" in str(info.value) and str(flac) in str(info.value)


def test_utterance_of_another_chapter_is_rejected(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    trans = _trans(tmp_path)
    trans.write_text(trans.read_text() + "84-999-0000 WRONG CHAPTER\n")
    with pytest.raises(LibriSpeechError, match=r"does not belong to chapter 84-121123") as info:
        prepare_librispeech(tmp_path / "c", tmp_path / "m", ["dev-clean"])
    assert f"{trans}:4:" in str(info.value)


def test_missing_part_and_unknown_part(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    with pytest.raises(LibriSpeechError, match="dev-other"):
        prepare_librispeech(tmp_path / "c", tmp_path / "m", ["dev-other"])
    with pytest.raises(ValueError, match="unknown LibriSpeech part"):
        prepare_librispeech(tmp_path / "c", tmp_path / "m", ["dev-cleaner"])


def test_manifests_function_returns_exact_shape_and_explains_missing(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    m = tmp_path / "m"
    prepare_librispeech(tmp_path / "c", m, ["dev-clean", "test-clean"])
    got = librispeech_manifests(m, train="dev-clean", dev=["dev-clean"], test=["test-clean", "dev-clean"])
    assert got == {
        "train": [str(m / "dev-clean.jsonl")],
        "dev": [str(m / "dev-clean.jsonl")],
        "test": {"test-clean": str(m / "test-clean.jsonl"), "dev-clean": str(m / "dev-clean.jsonl")},
    }
    # explicit {name: file} mapping for test sets, relative to the manifest folder
    got = librispeech_manifests(m, train=[], dev=[], test={"clean": "test-clean.jsonl"})
    assert got["test"] == {"clean": str(m / "test-clean.jsonl")}
    with pytest.raises(FileNotFoundError) as info:
        librispeech_manifests(m)  # defaults include train-clean-100, never prepared here
    assert "train-clean-100.jsonl" in str(info.value) and "test-other.jsonl" in str(info.value)
    assert "run recipes/librispeech/run.sh --stage 1 --stop_stage 2 first" in str(info.value)


def test_download_extract_prepare_from_a_file_mirror(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "src")
    mirror = tmp_path / "mirror"
    build.make_librispeech_archives(tmp_path / "src", mirror, parts=("test-clean",))
    root = tmp_path / "root"
    # The published checksums are verified: a fixture archive is not the official one.
    with pytest.raises(ChecksumError, match="test-clean.tar.gz"):
        download_librispeech(root, ["test-clean"], mirror=mirror.as_uri())
    assert (root / "test-clean.tar.gz.bad").exists()
    paths = download_librispeech(root, ["test-clean"], mirror=mirror.as_uri(), verify=False)
    assert paths == [root / "test-clean.tar.gz"]
    corpus = extract_librispeech(root, ["test-clean"])
    assert corpus == root / "LibriSpeech" and (corpus / "test-clean" / "1089" / "134686").is_dir()
    out = prepare_librispeech(root, tmp_path / "m", ["test-clean"])
    assert [u.id for u in read_manifest(out["test-clean"])] == ["1089-134686-0000", "1089-134686-0001"]


def test_pre_downloaded_data_dir_is_used_without_network(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "src")
    data_dir = tmp_path / "predownloaded"
    build.make_librispeech_archives(tmp_path / "src", data_dir, parts=("dev-clean",))
    paths = download_librispeech(
        tmp_path / "root", ["dev-clean"], mirror="http://127.0.0.1:9", data_dir=data_dir, verify=False
    )
    assert paths[0].read_bytes() == (data_dir / "dev-clean.tar.gz").read_bytes()


def test_cli_reports_errors_in_one_line(build, tmp_path, capsys):
    build.make_librispeech_tree(tmp_path / "c")
    dirs = ["--corpus-dir", str(tmp_path / "c"), "--out-dir", str(tmp_path / "m")]
    assert main(["prepare", *dirs, "--parts", "test-clean"]) == 0
    lines = (tmp_path / "m" / "test-clean.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["speaker"] == "1089-134686"
    trans = _trans(tmp_path)
    trans.write_text("garbage line\n")
    assert main(["prepare", *dirs, "--parts", "dev-clean"]) == 2
    err = capsys.readouterr().err
    assert f"error: {trans}:1:" in err and "Traceback" not in err


def test_unreadable_flac_names_the_file(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    flac = _trans(tmp_path).parent / "84-121123-0002.flac"
    flac.write_bytes(b"not a flac file at all")
    with pytest.raises(LibriSpeechError, match="unreadable audio") as info:
        prepare_librispeech(tmp_path / "c", tmp_path / "m", ["dev-clean"])
    assert str(flac) in str(info.value)


def test_checksum_list_in_md5sum_and_sha256sum_format(tmp_path):
    from asr_pe.data.download import ChecksumListError, read_checksum_list

    listing = tmp_path / "md5sum.txt"
    listing.write_text("c0e676e450a7ff2f54aeade5171606fa  dev-clean.tar.gz\n"
                       "76F87D090650617FCA0CAC8F88B9416E0EBF80350ACB97B343A85FA903728AB3 *test-clean.tar.gz\n\n")
    assert read_checksum_list(listing, tmp_path) == {
        "dev-clean.tar.gz": {"md5": "c0e676e450a7ff2f54aeade5171606fa"},
        "test-clean.tar.gz": {"sha256": "76f87d090650617fca0cac8f88b9416e0ebf80350acb97b343a85fa903728ab3"},
    }
    listing.write_text("c0e676e450a7ff2f54aeade5171606fa  dev-clean.tar.gz\nnot a checksum line\n")
    with pytest.raises(ChecksumListError, match=r"md5sum.txt:2: not a"):
        read_checksum_list(listing, tmp_path)
