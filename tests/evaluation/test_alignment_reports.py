"""Scoring another system as reviewers do (issue 46 point 5), on TED-LIUM 3's real STM layout.

The talks come from tests/recipes/fixtures.py (`make_tedlium_tree`: the official STM lines, with
``inter_segment_gap`` lines, ``<unk>``, own-speaker ``ignore_time_segment_in_scoring`` speech), prepared
by `asr_pe.data.tedlium.prepare_tedlium` as the recipe prepares them. Checked:

- a talk-level CTM keyed by the talk name (what a system decoding ``<talk>.sph`` writes) names the
  recording of a whole talk (the export once renamed it ``<talk>-2`` and read the CTM as
  utterance-level, scoring the applause before the talk and the music after it as insertions);
  words in unscored stretches (inter_segment_gap, untranscribed speech) are dropped and counted,
  as sclite drops words in ``ignore_time_segment_in_scoring`` segments;
- ``ref_recordings.stm`` keeps the official STM's scored segments and marks every ignored line of it
  as ignored (the file sclite needs to score that CTM as score.py does);
- meeteval's SISO WER on ``ref.stm`` / ``hyp.stm`` equals score.py's ``all`` row;
- ``alignments.pra`` blocks carry the record's counts; ``speakers.csv`` pools per speaker;
- ``--normalizer whisper_english`` is off by default, applied to both sides when named, and
  recorded (name, package, version); an unknown name is one argparse error;
- ``*.text`` hypothesis files are read as Kaldi text without ``--format``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from asr_pe.data import kaldi_export
from asr_pe.data.manifest import read_manifest
from asr_pe.data.tedlium import parse_stm, prepare_tedlium
from asr_pe.evaluation import alignment_report
from asr_pe.evaluation.buckets import read_per_utt
from asr_pe.evaluation.external_scoring import guess_format, score_hypotheses

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


trees = _load("asr_pe_recipe_test_fixtures", ROOT / "tests" / "recipes" / "fixtures.py")
score_cli = _load("score_cli_reports", ROOT / "score.py")


@pytest.fixture(scope="module")
def ted(tmp_path_factory):
    """dev of the fixture tree: AlexSmith_2009 (gaps only: one whole-talk entry 3.1-39.4 s) and
    MariaLopez_2010 (a song left unscored at 18.0-24.3 s: two parts; a <unk>-only segment)."""
    root = tmp_path_factory.mktemp("ted")
    trees.make_tedlium_tree(root, {"dev": trees.TEDLIUM_LAYOUT["dev"]})
    out = prepare_tedlium(root, root / "manifests", splits=["dev"])["dev"]
    stm_dir = root / "TEDLIUM_release-3" / "legacy" / "dev" / "stm"
    return {"segments": Path(out["segments"]), "talks": Path(out["talks"]), "stm_dir": stm_dir}


def _ctm(utts, extra):
    """A recording-level CTM: every reference word of each utterance inside its span (recording
    times), plus ``extra`` (talk, start, word) words; sorted as sclite reads it."""
    rows = []
    for u in utts:
        words = u.text.split()
        step = u.duration / (len(words) + 1)
        rows += [(u.speaker, u.offset + step * (k + 0.5), w) for k, w in enumerate(words)]
    rows += extra
    return "".join(f"{talk} 1 {start:.2f} 0.10 {word}\n" for talk, start, word in sorted(rows))


EXTRA = [("AlexSmith_2009", 1.0, "applause"),     # the inter_segment_gap before the first segment
         ("AlexSmith_2009", 15.5, "um"),          # the gap 15.25-16.02 s inside the talk's span
         ("AlexSmith_2009", 40.5, "music"),       # after the last segment (39.4 s)
         ("MariaLopez_2010", 20.0, "la"),         # the unscored song 18.0-24.3 s
         ("MariaLopez_2010", 21.0, "la")]


def test_a_talk_level_ctm_keyed_by_the_talk_scores_the_talk_and_drops_unscored_words(ted, tmp_path):
    talks = read_manifest(ted["talks"])
    assert {u.id for u in talks} == {"AlexSmith_2009", "MariaLopez_2010-part1", "MariaLopez_2010-part2"}
    rec = kaldi_export.recording_ids(talks)
    assert rec["AlexSmith_2009"] == "AlexSmith_2009"  # was AlexSmith_2009-2 while the README said <talk>
    assert rec["MariaLopez_2010-part1"] == rec["MariaLopez_2010-part2"] == "MariaLopez_2010"
    segments = read_manifest(ted["segments"])
    ctm = tmp_path / "talks.ctm"
    ctm.write_text(_ctm(segments, EXTRA))

    # the segment set: every extra word lies outside the scored segments: dropped, counted, 0 errors
    rows, folder = score_hypotheses(ted["segments"], ctm, tmp_path / "sys", n_boot=10)
    meta = json.loads((folder / "buckets.meta.json").read_text())
    assert rows[-1]["errors"] == 0 and meta["ctm_words_outside_utterances"] == 5
    assert meta["normalizer"] is None

    # the talk set: the whole talk is one utterance spanning 3.1-39.4 s, so applause and music
    # (outside it) and the song (between the parts) are dropped; the "um" inside its span is an
    # insertion, as it is for a model of ours decoding the same span
    rows, folder = score_hypotheses(ted["talks"], ctm, tmp_path / "sys", n_boot=10)
    per = {r["id"]: r for r in read_per_utt(folder / "per_utt.jsonl")}
    assert per["AlexSmith_2009"]["ins"] == 1 and per["AlexSmith_2009"]["errors"] == 1
    assert "applause" not in per["AlexSmith_2009"]["hyp"] and "music" not in per["AlexSmith_2009"]["hyp"]
    assert per["MariaLopez_2010-part1"]["errors"] == per["MariaLopez_2010-part2"]["errors"] == 0
    meta = json.loads((folder / "buckets.meta.json").read_text())
    assert meta["ctm_words_outside_utterances"] == 4


def test_ref_recordings_stm_ignores_what_the_official_stm_ignores(ted, tmp_path):
    segments = read_manifest(ted["segments"])
    hyp = tmp_path / "hyp.text"  # a *.text file: Kaldi text without --format
    hyp.write_text("".join(f"{u.id} {u.text}\n" for u in segments))
    _, folder = score_hypotheses(ted["segments"], hyp, tmp_path / "sys", n_boot=10)
    ours = [line.split(maxsplit=5) for line in (folder / "ref_recordings.stm").read_text().splitlines()]
    ignored = [(r[0], float(r[3]), float(r[4])) for r in ours if r[5].endswith("ignore_time_segment_in_scoring")]
    scored = {(r[0], round(float(r[3]), 2), round(float(r[4]), 2)) for r in ours if r[2] != "inter_segment_gap"}
    assert all(r[2] == "inter_segment_gap" for r in ours if (r[0], float(r[3]), float(r[4])) in ignored)
    for stm in sorted(ted["stm_dir"].glob("*.stm")):
        for seg in parse_stm(stm):
            mid = (seg.start + seg.end) / 2
            in_ignored = any(t == seg.talk and a <= mid < b for t, a, b in ignored)
            if seg.is_gap or seg.ignored or seg.transcript.strip() == "<unk>":
                assert in_ignored, f"{seg.source}: not ignored in ref_recordings.stm"
            else:  # a scored segment of the official file is a scored segment of ours, same times
                assert (seg.talk, seg.start, seg.end) in scored and not in_ignored, seg.source
    # sorted by recording, then start time (sclite's order); the last gap runs to the file's end
    assert [(r[0], float(r[3])) for r in ours] == sorted((r[0], float(r[3])) for r in ours)
    assert ours[-1][2] == "inter_segment_gap" and float(ours[-1][4]) > 1e5


def test_meeteval_gives_score_py_s_wer(ted, tmp_path):
    wer_api = pytest.importorskip("meeteval.wer.api")
    segments = read_manifest(ted["segments"])
    hyps = {u.id: u.text for u in segments}
    first, second, third = (u.id for u in segments[:3])
    hyps[first] = "It's A truly great honour to be here"        # case, a substitution, a deletion
    hyps[second] = ""                                            # nothing decoded: all deletions
    hyps[third] = hyps[third] + " again and again"               # insertions
    hyp = tmp_path / "hyp.jsonl"
    hyp.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in hyps.items()))
    rows, folder = score_hypotheses(ted["segments"], hyp, tmp_path / "sys", n_boot=10)
    total = rows[-1]
    assert total["errors"] > 0
    results = wer_api.sisower(str(folder / "ref.stm"), str(folder / "hyp.stm"))
    assert sum(r.errors for r in results.values()) == total["errors"]
    assert sum(r.length for r in results.values()) == total["ref_words"]
    # the trn pair holds the same words, ids as ESPnet hands them to sclite
    ref_trn = (folder / "ref.trn").read_text().splitlines()
    assert len(ref_trn) == len(segments) and ref_trn[0].endswith(f"(AlexSmith_2009-{segments[0].id})")


def test_pra_blocks_and_speaker_tables_carry_the_scored_counts(ted, tmp_path, capsys):
    segments = read_manifest(ted["segments"])
    hyp = tmp_path / "hyp.text"
    hyp.write_text("".join(f"{u.id} {'the ' + u.text if u.speaker == 'MariaLopez_2010' else u.text}\n"
                           for u in segments))
    _, folder = score_hypotheses(ted["segments"], hyp, tmp_path / "sys", n_boot=10)
    records = read_per_utt(folder / "per_utt.jsonl")
    blocks = (folder / "alignments.pra").read_text().strip().split("\n\n")
    assert len(blocks) == len(records)
    for block, rec in zip(blocks, records):
        lines = block.splitlines()
        assert lines[0].endswith(f"-{rec['id']})")
        c, s, d, i = map(int, lines[1].split(")")[1].split())
        assert (s, d, i) == (rec["sub"], rec["del"], rec["ins"]) and c + s + d == rec["ref_words"]
    maria = next(b for b in blocks if "MariaLopez" in b.splitlines()[0]).splitlines()
    assert maria[2].startswith("REF:  ***") and maria[3].startswith("HYP:  THE") and maria[4].startswith("Eval: I")
    with open(folder / "speakers.csv", newline="") as f:
        rows = {r["speaker"]: r for r in csv.DictReader(f)}
    n_maria = sum(u.speaker == "MariaLopez_2010" for u in segments)
    assert rows["MariaLopez_2010"]["ins"] == str(n_maria) and rows["AlexSmith_2009"]["errors"] == "0"
    words = sum(len(u.text.split()) for u in segments if u.speaker == "MariaLopez_2010")
    assert float(rows["MariaLopez_2010"]["wer"]) == round(100 * n_maria / words, 2)
    assert list(rows)[0] == "MariaLopez_2010" and list(rows)[-1] == "all"  # worst first, then the set
    assert rows["all"]["ins"] == str(n_maria)
    # the same files for any scored folder (a run's eval/<set> too), from the command line
    for name in ("alignments.pra", "speakers.csv", "speakers.md"):
        (folder / name).unlink()
    assert alignment_report.main([str(folder), "--manifest", str(ted["segments"])]) == 0
    assert (folder / "alignments.pra").read_text().strip().split("\n\n") == blocks
    assert alignment_report.main([str(tmp_path), "--manifest", str(ted["segments"])]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_whisper_normaliser_is_named_applied_to_both_sides_and_recorded(ted, tmp_path, capsys):
    pytest.importorskip("whisper_normalizer")
    segments = read_manifest(ted["segments"])
    hyp = tmp_path / "hyp.jsonl"
    # a cased, punctuated system: "It is a truly great honor, to be here tonight."
    lines = {u.id: u.text for u in segments}
    lines[segments[0].id] = "It is a truly great honor, to be here tonight."
    hyp.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in lines.items()))
    plain, _ = score_hypotheses(ted["segments"], hyp, tmp_path / "plain", n_boot=10)
    assert plain[-1]["errors"] > 0  # "it's" against "it is", "honor," against "honor", "tonight."
    rows, folder = score_hypotheses(ted["segments"], hyp, tmp_path / "norm", n_boot=10, normalizer="whisper_english")
    assert rows[-1]["errors"] == 0  # Whisper's normaliser expands "it's" on the reference side too
    meta = json.loads((folder / "buckets.meta.json").read_text())
    assert meta["normalizer"]["name"] == "whisper_english" and meta["normalizer"]["package"] == "whisper-normalizer"
    assert meta["normalizer"]["version"] == "0.1.15"
    rc = None
    with pytest.raises(SystemExit) as info:
        score_cli.main(["--manifest", str(ted["segments"]), "--hyp", str(hyp), "--out", str(tmp_path / "x"),
                        "--normalizer", "nemo"])
    rc = info.value.code
    assert rc == 2 and "invalid choice: 'nemo'" in capsys.readouterr().err


def test_a_missing_normaliser_package_is_one_error(monkeypatch):
    import importlib

    from asr_pe.evaluation import external_scoring

    real = importlib.import_module

    def no_package(name, *a, **k):
        if name.startswith("whisper_normalizer"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", no_package)
    with pytest.raises(external_scoring.NormalizerError, match=r"pip install -e '\.\[normalize\]'"):
        external_scoring.load_normalizer("whisper_english")


@pytest.mark.parametrize("name, fmt", [("hyp.text", "text"), ("test_clean.text", "text"), ("text", "text"),
                                       ("hyp.txt", "text"), ("hyp.ctm", "ctm"), ("hyp.jsonl", "jsonl")])
def test_hypothesis_format_from_the_file_name(name, fmt):
    assert guess_format(name) == fmt
