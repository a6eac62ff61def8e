"""asr_pe.plots.natural_bins / scripts/plot_natural_bins.py: the CAPE paper's figure, the natural test
utterances in 5 s bins, one line per PE, from the per-utterance results already written."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from asr_pe.evaluation.buckets import bucket_table, resolve_edges, step_edges, write_bucket_files, write_per_utt
from asr_pe.plots import cape_paper
from asr_pe.plots.natural_bins import natural_bins, natural_bins_report
from asr_pe.plots.wer_vs_length import RunDirError

ROOT = Path(__file__).resolve().parents[2]
DURATIONS = [1.0, 4.9, 5.0, 7.5, 12.0, 14.99, 23.0]        # bins 0-5 (2), 5-10 (2), 10-15 (2), 20-25 (1)


def _record(i, duration, errors, words=10):
    return {"id": f"u{i}", "duration": duration, "ref": "a " * words, "hyp": "b", "errors": errors,
            "ref_words": words, "sub": errors, "del": 0, "ins": 0, "char_errors": 2 * errors,
            "ref_chars": 5 * words}


def _run(root, name, *, pe, seed, errors, durations=DURATIONS, tmax=8.0):
    run = root / name
    run.mkdir(parents=True)
    (run / "run_info.json").write_text(json.dumps({"pe": pe, "loss": "ctc", "seed": seed, "train_max_duration": tmax}))
    recs = [_record(i, d, e) for i, (d, e) in enumerate(zip(durations, errors))]
    write_per_utt(recs, run / "eval" / "test" / "per_utt.jsonl")
    write_bucket_files(bucket_table(recs, n_boot=10), run / "eval" / "test")   # the doubling buckets, as evaluated
    return run


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    _run(root, "rope_s0", pe="rope", seed=0, errors=[1, 1, 2, 2, 5, 5, 9])
    _run(root, "rope_s1", pe="rope", seed=1, errors=[1, 3, 2, 4, 5, 7, 9])
    _run(root, "cape_s0", pe="cape", seed=0, errors=[2, 2, 2, 2, 2, 2, 2])
    return root


def test_step_edges_cover_the_longest_utterance_in_fixed_bins():
    assert step_edges(34.9) == [0, 5, 10, 15, 20, 25, 30, 35]
    assert step_edges(35.0)[-2:] == [35, 40]                          # 35 s itself is in [35, 40)
    assert step_edges(0.0) == [0, 5]
    assert resolve_edges("step:5", [3.0, 23.0]) == [0, 5, 10, 15, 20, 25]
    assert resolve_edges("step:2.5", [4.0]) == [0, 2.5, 5.0]
    assert resolve_edges("doubling", [23.0]) == [0, 2, 4, 8, 16, 32]  # the other scheme unchanged
    for bad in ("step", "step:x", "step:0", "steps:5", "doubling:2"):
        with pytest.raises(ValueError):
            resolve_edges(bad, [1.0])


def test_bins_pool_utterances_and_seeds_with_crossed_intervals(runs):
    nb = natural_bins([runs], "test", n_boot=400)
    assert nb.edges == [0, 5, 10, 15, 20, 25]
    wer = {s.label: s for s in nb.series["wer"]}
    rope, cape = wer["rope/ctc"], wer["cape/ctc"]
    assert rope.buckets == ["0-5", "5-10", "10-15", "20-25", "all"]   # 15-20 holds no utterance: no point
    assert nb.utterances["rope/ctc"] == {"0-5": 2, "5-10": 2, "10-15": 2, "20-25": 1, "all": 7}
    # 0-5: seed 0 (1+1)/20, seed 1 (1+3)/20 -> 10 % and 20 %, pooled 15 %
    assert rope.per_seed["0-5"] == pytest.approx([10.0, 20.0]) and rope.value["0-5"] == pytest.approx(15.0)
    assert rope.value["10-15"] == pytest.approx(100 * (5 + 5 + 5 + 7) / 40)
    assert cape.value["all"] == pytest.approx(20.0) and cape.per_seed["all"] == [20.0]
    # CER: twice the errors over five times the words
    assert {s.label: s for s in nb.series["cer"]}["rope/ctc"].value["0-5"] == pytest.approx(6.0)
    # a bin of one utterance scored alike by both seeds has no spread
    assert (rope.ci_low["20-25"], rope.ci_high["20-25"]) == pytest.approx((90.0, 90.0))
    # 0-5: the extremes a draw can reach are 10 % (u0 twice, any seeds) and 30 % (u1 twice, seed 1
    # twice); the crossed interval lies within them, around the pooled 15 %, and is wider than
    # seed 0's own utterance interval (u0 and u1 both 1 error: no spread at all)
    lo, hi = rope.ci_low["0-5"], rope.ci_high["0-5"]
    assert 10.0 <= lo < 15.0 < hi <= 30.0
    assert [r for r in nb.runs if r.seed == 0 and r.info["pe"] == "rope"][0].rows[0]["wer_ci_high"] == 10.0
    assert (cape.ci_low["0-5"], cape.ci_high["0-5"]) == pytest.approx((20.0, 20.0))


def test_report_files_hold_every_label_bin_and_metric(runs, tmp_path):
    files = natural_bins_report([runs], tmp_path / "plots", test_set="test", n_boot=50)
    assert files["png"].stat().st_size > 10_000
    rows = list(csv.DictReader(files["csv"].open()))
    # 2 labels x 2 metrics x (rope: 4 bins + all; cape: 4 bins + all)
    assert len(rows) == 20
    got = {(r["label"], r["metric"], r["bin"]): r for r in rows}
    assert float(got[("rope/ctc", "wer", "0-5")]["value"]) == 15.0
    assert got[("rope/ctc", "wer", "0-5")]["per_seed"] == "10.0000;20.0000"
    assert got[("cape/ctc", "cer", "all")]["utterances"] == "7"
    runs_rows = list(csv.DictReader(files["runs_csv"].open()))
    assert len(runs_rows) == 3 * 5                                    # per run: 4 bins + all
    md = files["md"].read_text()
    assert "| rope/ctc | 0, 1 | 15.0 [" in md and "0-5 s: 2, 5-10 s: 2, 10-15 s: 2, 20-25 s: 1, all: 7" in md
    assert "utterances resampled within the bin" in md


def test_seeds_that_scored_other_utterances_are_refused(tmp_path):
    root = tmp_path / "runs"
    _run(root, "a", pe="rope", seed=0, errors=[1] * 7)
    _run(root, "b", pe="rope", seed=1, errors=[1] * 6, durations=DURATIONS[:6])
    with pytest.raises(RunDirError, match="scored different utterances"):
        natural_bins([root], "test")


def test_script_cli(runs, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("plot_natural_bins", ROOT / "scripts" / "plot_natural_bins.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([str(runs), "--test-set", "test", "--out", str(tmp_path / "o"), "--n-boot", "20"]) == 0
    assert (tmp_path / "o" / "natural_bins.png").exists()
    assert script.main([str(runs), "--test-set", "dev", "--out", str(tmp_path / "o")]) == 2
    assert "error: no run has eval/dev/buckets.csv" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        script.main([str(runs), "--test-set", "test", "--out", str(tmp_path / "o"), "--step", "0"])
    assert stop.value.code == 2
    assert "CAPE paper drew" not in (tmp_path / "o" / "natural_bins.md").read_text()   # no caption unless asked
    # the recipes' stage 6: what the paper did, then the recipe's own note, under the title and in the table
    assert script.main([str(runs), "--test-set", "test", "--out", str(tmp_path / "c"), "--n-boot", "20",
                        "--paper-caption", "--note", "Here: a toy corpus."]) == 0
    md = (tmp_path / "c" / "natural_bins.md").read_text().splitlines()
    assert md[2] == cape_paper.caption("natural_bins", "Here: a toy corpus.")
    assert "TED-LIUM 3's natural test utterances in 5 s duration bins" in md[2] and md[2].endswith("a toy corpus.")
