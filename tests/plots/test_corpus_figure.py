"""scripts/plot_corpus_figure.py / asr_pe.plots.corpus_figure: the study's figure of a corpus recipe,
one panel per test set and one line per PE, with the numbers of every plotted point beside it."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import bucket_table, write_bucket_files
from asr_pe.plots.corpus_figure import corpus_test_sets, plot_corpus_figure
from asr_pe.plots.wer_vs_length import RunDirError

ROOT = Path(__file__).resolve().parents[2]


def _records(durations, errors):
    return [{"id": f"u{i}", "duration": d, "errors": e, "ref_words": 10, "sub": e, "del": 0, "ins": 0,
             "char_errors": e, "ref_chars": 50} for i, (d, e) in enumerate(zip(durations, errors))]


@pytest.fixture
def runs(tmp_path):
    """Two PEs (a degrading sinusoidal, a flat CAPE), each evaluated on a short and a long-form set."""
    sets = {"test-clean": [1.5, 3.0, 6.0, 12.0], "test-clean_long": [20.0, 40.0, 80.0, 160.0]}
    for pe, slope in (("sinusoidal", 2), ("cape", 0)):
        run = tmp_path / "runs" / pe
        run.mkdir(parents=True)
        (run / "run_info.json").write_text(json.dumps({"pe": pe, "loss": "ctc", "seed": 0, "train_max_duration": 16.0}))
        for name, durations in sets.items():
            errs = [1 + slope * k for k in range(len(durations))] if name.endswith("_long") else [1] * len(durations)
            write_bucket_files(bucket_table(_records(durations, errs), n_boot=20), run / "eval" / name)
    return tmp_path / "runs"


def test_one_panel_per_set_one_line_per_pe_and_the_numbers_beside(runs, tmp_path):
    assert corpus_test_sets([runs]) == ["test-clean", "test-clean_long"]
    files = plot_corpus_figure([runs], tmp_path / "plots" / "wer_vs_length_all.png")
    assert files["png"].stat().st_size > 10_000
    rows = list(csv.DictReader(files["csv"].open()))
    # every bucket of every run and set, "all" included: 2 PEs x (4 + 1 rows) x 2 sets
    assert len(rows) == 20
    assert {(r["label"], r["test_set"]) for r in rows} == {
        (pe, s) for pe in ("sinusoidal/ctc", "cape/ctc") for s in ("test-clean", "test-clean_long")}
    wer = {(r["label"], r["bucket"]): float(r["wer"]) for r in rows if r["test_set"] == "test-clean_long"}
    assert wer[("sinusoidal/ctc", "128-256")] == 70.0 and wer[("cape/ctc", "128-256")] == 10.0


def test_a_requested_set_no_run_holds_is_an_error(runs, tmp_path):
    with pytest.raises(RunDirError, match="no run has eval/test-other/buckets.csv"):
        plot_corpus_figure([runs], tmp_path / "f.png", test_sets=["test-clean", "test-other"])
    spec = importlib.util.spec_from_file_location("plot_corpus_figure", ROOT / "scripts" / "plot_corpus_figure.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([str(runs), "--out", str(tmp_path / "g.png"), "--test-sets", "test-other"]) == 2
    assert script.main([str(runs), "--out", str(tmp_path / "g.png"), "--metric", "cer"]) == 0
    assert (tmp_path / "g.csv").exists()
