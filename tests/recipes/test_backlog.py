"""recipes/synth/study/backlog.py, the helpers of the ladder backlog lane, on archived runs: a run's
ladder decodings staged and archived give the rows study/ladder/ holds for it, its report and
choice are copied with the study's paths, and the reproduction check tells an identical rerun
from one that differs."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

from asr_pe.results_table import add_runs, read_table, render_run, table_of

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO / "recipes" / "synth" / "study"

_NAME = "asr_pe_synth_backlog"
if _NAME not in sys.modules:     # loaded by path: recipes/ is no package
    _spec = importlib.util.spec_from_file_location(_NAME, STUDY / "backlog.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
backlog = sys.modules[_NAME]


def _write_out(study: Path, run: str, dest: Path) -> Path:
    """An archived run's files written out as a run folder."""
    for rel, text in render_run(read_table(table_of(study))[run]).items():
        (dest / run / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / run / rel).write_text(text, encoding="utf-8")
    return dest / run


def test_a_ladder_run_staged_and_archived_gives_the_archived_rows(tmp_path):
    run = _write_out(STUDY / "ladder", "rope_ctc_s3", tmp_path / "runs")
    (run / "eval" / "ladder").mkdir()
    shutil.copy(STUDY / "ladder" / "reports" / "rope_ctc_s3.md", run / "eval" / "ladder" / "report.md")
    choice = json.loads((STUDY / "ladder" / "reports" / "rope_ctc_s3.choice.json").read_text())
    (run / "eval" / "ladder" / "choice.json").write_text(json.dumps(
        {**choice, "run": str(run), "ladder": "/root/.cache/asr_pe/synth_ladder/3b1c23b1774d"}))
    staged = backlog.stage(run, tmp_path / "archive")
    add_runs(tmp_path / "dest" / "results.jsonl.xz", [staged], remedy_utts=True)
    assert read_table(tmp_path / "dest" / "results.jsonl.xz")["rope_ctc_s3"] \
        == read_table(table_of(STUDY / "ladder"))["rope_ctc_s3"]
    backlog.reports(run, tmp_path / "dest" / "reports")
    assert (tmp_path / "dest" / "reports" / "rope_ctc_s3.choice.json").read_text() \
        == (STUDY / "ladder" / "reports" / "rope_ctc_s3.choice.json").read_text()
    assert backlog.archived(tmp_path / "dest", "rope_ctc_s3") and not backlog.archived(tmp_path / "dest", "rope_ctc_s4")
    assert "chosen window:2.5" in backlog.summary(tmp_path / "dest", "rope_ctc_s3")


def test_the_reproduction_check_tells_an_identical_rerun_from_a_different_one(tmp_path):
    run = _write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs")
    same = backlog.reproduce(run, STUDY / "seeds")
    assert same["reproduced"] and same["test"]["differing"] == 0 and same["longform"]["differing"] == 0
    per_utt = run / "eval" / "test" / "per_utt.jsonl"
    rows = [json.loads(line) for line in per_utt.read_text().splitlines()]
    rows[3]["hyp"] += " x"
    per_utt.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = backlog.reproduce(run, STUDY / "seeds")
    assert not other["reproduced"] and other["test"]["differing"] == 1


def test_the_staged_run_keeps_its_own_test_decodings_and_drops_the_dev_pool_s_utterances(tmp_path):
    """A retrain that does not reproduce the archived run is another model: its test and long-form
    decodings go into the archive with it; the dev pool's sets keep their bucket tables only."""
    run = _write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs")
    dev = run / "eval" / "ladder_dev_nogap_5"
    dev.mkdir(parents=True)
    for name in ("buckets.csv", "buckets.meta.json", "per_utt.jsonl"):
        (dev / name).write_text((run / "eval" / "test" / name).read_text())
    staged = backlog.stage(run, tmp_path / "archive")
    kept = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    assert "eval/test/per_utt.jsonl" in kept and "eval/longform/per_utt.jsonl" in kept
    assert "eval/ladder_dev_nogap_5/buckets.csv" in kept and "eval/ladder_dev_nogap_5/per_utt.jsonl" not in kept


def test_the_reproduction_check_reads_the_main_study_s_archive_that_names_its_checkpoint_only(tmp_path):
    """study/runs/ predates checkpoint records ("checkpoint": "best.ckpt", no step): a retrain of
    one of its runs, whose meta records the step, is judged by its hypotheses alone."""
    run = _write_out(STUDY / "runs", "shaw_ctc_s0", tmp_path / "runs")
    for s in ("test", "longform"):
        meta_path = run / "eval" / s / "buckets.meta.json"
        meta = json.loads(meta_path.read_text())
        assert meta["checkpoint"] == "best.ckpt"
        meta["checkpoint"] = {"name": "best.ckpt", "global_step": 1015, "sha256": "0" * 64}
        meta_path.write_text(json.dumps(meta))
    same = backlog.reproduce(run, STUDY / "runs")
    assert same["reproduced"] and same["test_best_step"] == [None, 1015]
    assert same["test"]["differing"] == 0 and same["test"]["utterances"] == 150
    per_utt = run / "eval" / "longform" / "per_utt.jsonl"
    rows = [json.loads(line) for line in per_utt.read_text().splitlines()]
    rows[0]["hyp"] += " x"
    per_utt.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not backlog.reproduce(run, STUDY / "runs")["reproduced"]
