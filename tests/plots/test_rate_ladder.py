"""asr_pe.plots.rate_ladder / scripts/plot_rate_ladder.py: error rate versus speaking rate per PE, the
same utterances at every rung, seeds pooled with a crossed CI, and the ratio to the plain rung."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import bucket_table, write_bucket_files, write_per_utt
from asr_pe.evaluation.rate_ladder import RateLadderError
from asr_pe.plots.rate_ladder import rate_ladder, rate_report

ROOT = Path(__file__).resolve().parents[2]
RUNGS = {"": 1.0, "_tempo0p8": 0.8, "_tempo1p2": 1.2}      # folder suffix -> tempo


def _write(run, folder, errors, ids=None):
    ids = ids or [f"u{i}" for i in range(len(errors))]
    recs = [{"id": uid, "duration": 2.0 + i, "ref": "x", "hyp": "y", "errors": e, "ref_words": 10, "sub": e,
             "del": 0, "ins": 0, "char_errors": 3 * e, "ref_chars": 50} for i, (uid, e) in enumerate(zip(ids, errors))]
    write_per_utt(recs, run / "eval" / folder / "per_utt.jsonl")
    write_bucket_files(bucket_table(recs, n_boot=5), run / "eval" / folder)


def _run(root, name, pe, seed, errors_by_tempo):
    """A run folder with config.yaml (its 10 ms hop), run_info.json and one result per rung."""
    run = root / name
    run.mkdir(parents=True)
    (run / "run_info.json").write_text(json.dumps({"pe": pe, "loss": "ctc", "seed": seed}))
    (run / "config.yaml").write_text("data:\n  features:\n    frame_shift_ms: 10.0\n")
    for suffix, tempo in RUNGS.items():
        _write(run, f"test{suffix}", errors_by_tempo[tempo])
    return run


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    # rope degrades when faster; cape does not. Four utterances of 10 words each.
    _run(root, "rope_s0", "rope", 0, {1.0: [1, 1, 1, 1], 0.8: [1, 2, 1, 2], 1.2: [3, 3, 2, 4]})
    _run(root, "rope_s1", "rope", 1, {1.0: [1, 1, 2, 0], 0.8: [2, 1, 1, 2], 1.2: [4, 2, 3, 3]})
    _run(root, "cape_s0", "cape", 0, {1.0: [2, 2, 2, 2], 0.8: [2, 2, 2, 2], 1.2: [2, 2, 2, 2]})
    return root


def test_rates_ratios_and_crossed_intervals(runs):
    ladders = {lad.label: lad for lad in rate_ladder([runs], "test", values=[0.8, 1.0, 1.2], n_boot=300)}
    rope, cape = ladders["rope/ctc"], ladders["cape/ctc"]
    assert rope.seeds == [0, 1] and cape.seeds == [0]
    r12 = rope.rungs["wer"][1.2]
    # 1.2: seed 0 12 errors / 40 words, seed 1 12 / 40 -> 30 %; plain 4 and 4 -> 10 %: ratio 24 / 8 = 3
    assert r12.utterances == 4 and r12.per_seed == pytest.approx([30.0, 30.0]) and r12.rate == pytest.approx(30.0)
    assert r12.ratio == pytest.approx(3.0)
    assert r12.ci_low <= 30.0 <= r12.ci_high and r12.ratio_ci_low <= 3.0 <= r12.ratio_ci_high
    assert r12.ratio_ci_low > 1.0                  # every draw of utterances and seeds: more errors when faster
    plain = rope.rungs["wer"][1.0]
    assert plain.ratio == 1.0 and (plain.ratio_ci_low, plain.ratio_ci_high) == (1.0, 1.0)
    assert rope.rungs["cer"][1.2].rate == pytest.approx(100 * 3 * 24 / 400)    # 18 %
    c = cape.rungs["wer"][1.2]
    assert (c.rate, c.ci_low, c.ci_high, c.ratio) == pytest.approx((20.0, 20.0, 20.0, 1.0))


def test_report_files(runs, tmp_path):
    files = rate_report([runs], tmp_path / "out", test_set="test", values=[0.8, 1.0, 1.2], n_boot=50)
    assert files["png"].stat().st_size > 10_000
    rows = list(csv.DictReader(files["csv"].open()))
    assert len(rows) == 2 * 2 * 3                  # labels x metrics x rungs
    row = next(r for r in rows if r["label"] == "rope/ctc" and r["metric"] == "wer" and r["value"] == "1.2")
    assert (row["rate"], row["ratio"], row["per_seed"], row["seeds"]) == ("30.0000", "3.0000", "30.0000;30.0000", "0;1")
    md = files["md"].read_text()
    assert "The same 4 utterances at every rung" in md and "| rope/ctc | 0, 1 | 15.0 [" in md
    assert "3.00× [" in md


def test_a_missing_rung_or_other_utterances_are_refused(runs, tmp_path):
    with pytest.raises(RateLadderError, match=r"no eval/test_tempo1p3/per_utt.jsonl \(rung tempo=1.3\).*"
                                              r"scripts/evaluate_rates.py run=.* axis=tempo"):
        rate_ladder([runs], "test", values=[1.0, 1.3])
    _write(runs / "rope_s1", "test_tempo1p2", [1, 1, 1, 1], ids=["u0", "u1", "u2", "other"])
    with pytest.raises(RateLadderError, match=r"rope_s1/eval/test_tempo1p2: scored other utterances than the plain "
                                              r"rung \(1 missing, 1 extra"):
        rate_ladder([runs], "test", values=[1.0, 1.2])


def test_script_cli(runs, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("plot_rate_ladder", ROOT / "scripts" / "plot_rate_ladder.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "o"
    assert script.main([str(runs), "--test-set", "test", "--out", str(out), "--values", "0.8", "1", "1.2",
                        "--n-boot", "20", "--metric", "cer"]) == 0
    assert (out / "rate_tempo.png").exists()
    assert script.main([str(runs), "--test-set", "test", "--out", str(out)]) == 2     # default ladder: 0.9 missing
    assert "error: " in capsys.readouterr().err
    assert script.main([str(runs), "--test-set", "test", "--out", str(out), "--values", "0.8", "1", "1.2",
                        "--n-boot", "20", "--paper-caption"]) == 0
    caption = (out / "rate_tempo.md").read_text().splitlines()[2]
    assert caption.startswith("The CAPE paper's rate test: WSJ dev re-encoded with sox tempo -s 1.2")


def test_the_hop_axis_reads_the_runs_own_hop_as_the_plain_rung(runs):
    for run in runs.iterdir():
        _write(run, "test_hop12", [5, 5, 5, 5])
    ladders = {lad.label: lad for lad in rate_ladder([runs], "test", axis="hop_ms", values=[10, 12], n_boot=20)}
    rope = ladders["rope/ctc"]
    assert rope.plain == 10.0 and rope.rungs["wer"][10.0].ratio == 1.0
    # 12 ms: 40 errors over both seeds' 80 words; plain 8 errors: 5x
    assert rope.rungs["wer"][12.0].rate == pytest.approx(50.0) and rope.rungs["wer"][12.0].ratio == pytest.approx(5.0)
    with pytest.raises(RateLadderError, match=r"no eval/test_hop8/per_utt.jsonl \(rung hop_ms=8\)"):
        rate_ladder([runs], "test", axis="hop_ms", values=[8, 10])
