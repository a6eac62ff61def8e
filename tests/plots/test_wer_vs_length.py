"""WER-vs-length report from fake run dirs: three files, seed means, reference bucket."""

import csv
import importlib.util
import json
import math
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import write_bucket_files
from asr_pe.plots.wer_vs_length import RunDirError, aggregate, load_runs, make_report

BUCKETS = [("0-2", 0, 2, 1.2), ("2-4", 2, 4, 3.0), ("4-8", 4, 8, 6.1), ("8-16", 8, 16, 11.8)]


def fake_run(root, name, *, pe, seed, wers, tmax=4.9, test_set="test_long", loss="ctc", decode=None,
             buckets=BUCKETS):
    """A run dir with run_info.json and eval/<test_set>/buckets.csv holding the given WERs."""
    run = root / name
    rows = []
    for (label, lo, hi, dur), wer in zip(buckets, wers):
        rows.append({"bucket": label, "lo": float(lo), "hi": float(hi), "utterances": 10,
                     "mean_duration": dur, "ref_words": 100, "errors": int(wer), "sub": int(wer),
                     "del": 0, "ins": 0, "wer": float(wer), "wer_ci_low": wer - 2.0,
                     "wer_ci_high": wer + 3.0, "ref_chars": 500, "char_errors": int(wer * 2),
                     "cer": wer / 2, "cer_ci_low": wer / 2 - 1, "cer_ci_high": wer / 2 + 1})
    rows.append(dict(rows[0], bucket="all", lo=0.0, hi=math.inf, wer=sum(wers) / len(wers)))
    write_bucket_files(rows, run / "eval" / test_set, meta={"decode": {"method": decode}} if decode else None)
    run.mkdir(parents=True, exist_ok=True)
    info = {"pe": pe, "loss": loss, "encoder": "transformer", "seed": seed,
            "train_max_duration": tmax, "label": f"{pe}/{loss}"}
    (run / "run_info.json").write_text(json.dumps(info))
    return run


@pytest.fixture()
def sweep(tmp_path):
    root = tmp_path / "sweep"
    fake_run(root / "a", "rope_s0", pe="rope", seed=0, wers=[10, 12, 20, 40])
    fake_run(root / "a", "rope_s1", pe="rope", seed=1, wers=[12, 14, 24, 50])
    fake_run(root / "b", "none_s0", pe="none", seed=0, wers=[20, 20, 30, 80])
    return root


def test_report_files_from_sweep_dir(tmp_path, sweep):
    files = make_report([sweep], tmp_path / "fig")
    assert {k: p.name for k, p in files.items()} == {
        "png": "wer_vs_length.png", "csv": "wer_vs_length.csv", "md": "wer_vs_length.md"}
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and files["png"].stat().st_size > 5000

    with open(files["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * 5                                   # 3 runs x (4 buckets + all)
    rope_44 = [r for r in rows if r["label"] == "rope/ctc" and r["bucket"] == "4-8"]
    assert sorted((r["seed"], float(r["wer"])) for r in rope_44) == [("0", 20.0), ("1", 24.0)]
    assert {r["test_set"] for r in rows} == {"test_long"} and rows[0]["pe"] in ("rope", "none")

    md = files["md"].read_text()
    assert "rope/ctc" in md and "none/ctc" in md
    rope_line = next(line for line in md.splitlines() if line.startswith("| rope/ctc | 0, 1 |"))
    # 4-8 bucket: mean of 20 and 24, CI = mean of (18, 22) and (23, 27), seeds listed
    assert "22.0 [20.0, 25.0] (20.0, 24.0)" in rope_line
    none_line = next(line for line in md.splitlines() if line.startswith("| none/ctc | 0 |"))
    assert "30.0 [28.0, 33.0]" in none_line and "(" not in none_line


def test_relative_degradation_uses_last_bucket_inside_training_range(tmp_path, sweep):
    md = make_report([sweep], tmp_path / "fig")["md"].read_text()
    rel = md.split("Relative degradation")[1]
    # train_max_duration 4.9: buckets 0-2 and 2-4 lie inside, so 2-4 is the reference
    none_line = next(line for line in rel.splitlines() if line.startswith("| none/ctc"))
    assert "| 2-4 |" in none_line
    assert none_line.rstrip(" |").endswith("4.00×")            # 80 / 20
    rope_line = next(line for line in rel.splitlines() if line.startswith("| rope/ctc"))
    assert "1.69×" in rope_line                                # 22 / 13 for 4-8
    assert "3.46×" in rope_line                                # 45 / 13 for 8-16


def test_reference_falls_back_to_containing_bucket(tmp_path):
    fake_run(tmp_path, "r", pe="rope", seed=0, wers=[10, 20, 40, 80], tmax=1.5)
    md = make_report([tmp_path], tmp_path / "fig")["md"].read_text()
    line = next(x for x in md.split("Relative degradation")[1].splitlines() if x.startswith("| rope"))
    assert "| 0-2 |" in line and "8.00×" in line


def test_long_form_set_takes_its_reference_from_another_test_set(tmp_path, caplog):
    long_bucket = [("128-256", 128, 256, 160.0)]
    for pe, seed, short, long in [("rope", 0, [10, 12, 20, 40], 48), ("rope", 1, [12, 14, 24, 50], 56),
                                  ("none", 0, [20, 20, 30, 80], 25)]:
        fake_run(tmp_path / "sw", f"{pe}_s{seed}", pe=pe, seed=seed, wers=short, test_set="test")
        fake_run(tmp_path / "sw", f"{pe}_s{seed}", pe=pe, seed=seed, wers=[long], test_set="longform",
                 buckets=long_bucket)
    fake_run(tmp_path / "sw", "cape_s0", pe="cape", seed=0, wers=[30], test_set="longform", buckets=long_bucket)

    def rel_line(md, label):
        rel = md.split("Relative degradation")[1]
        return next(line for line in rel.splitlines() if line.startswith(f"| {label}"))

    alone = make_report([tmp_path / "sw"], tmp_path / "a", test_set="longform")["md"].read_text()
    assert "| n/a |" in rel_line(alone, "none/ctc")             # no bucket of its own inside 4.9 s
    md = make_report([tmp_path / "sw"], tmp_path / "b", test_set="longform", reference_set="test")["md"].read_text()
    assert "of test set `test`" in md
    assert rel_line(md, "none/ctc").endswith("| test: 2-4 | 1.25× |")          # 25 / 20
    assert rel_line(md, "rope/ctc").endswith("| test: 2-4 | 4.00× |")          # mean(48, 56) / mean(12, 14)
    assert rel_line(md, "cape/ctc").endswith("| n/a | – |")                    # cape has no test results
    assert "have no eval/test results" in caplog.text and "cape/ctc" in caplog.text
    # the reference set itself as the plotted set: the ordinary table
    same = make_report([tmp_path / "sw"], tmp_path / "c", test_set="test", reference_set="test")["md"].read_text()
    assert rel_line(same, "none/ctc").endswith("| 2-4 | 1.00× | 1.00× | 1.50× | 4.00× |")


def test_seed_means_and_run_listed_once(sweep):
    runs, test_set = load_runs([sweep, sweep / "a" / "rope_s0"])
    assert test_set == "test_long" and len(runs) == 3
    series = {s.label: s for s in aggregate(runs, "wer")}
    rope = series["rope/ctc"]
    assert rope.seeds == [0, 1]
    assert rope.value["8-16"] == pytest.approx(45.0)
    assert rope.ci_low["8-16"] == pytest.approx(43.0) and rope.ci_high["8-16"] == pytest.approx(48.0)
    assert rope.per_seed["8-16"] == [40.0, 50.0]
    assert rope.buckets[-1] == "all"
    cer = {s.label: s for s in aggregate(runs, "cer")}
    assert cer["none/ctc"].value["2-4"] == pytest.approx(10.0)


def test_two_runs_of_one_seed_under_one_label_are_refused_not_averaged(sweep):
    # e.g. a 60-step and a 300-step fine-tune of the same seed: pooled, they would pass for two seeds
    fake_run(sweep / "c", "rope_s1_longer", pe="rope", seed=1, wers=[11, 13, 22, 45])
    runs, _ = load_runs([sweep])
    with pytest.raises(RunDirError, match=r"rope_s1.* and .*rope_s1_longer.* are both seed 1 of 'rope/ctc'"):
        aggregate(runs, "wer")


def test_label_names_the_decoding_unless_ctc_greedy(tmp_path):
    root = tmp_path / "sweep"
    fake_run(root, "rope_ctc", pe="rope", seed=0, wers=[10, 12, 20, 40], decode="greedy")
    fake_run(root, "rope_ctc_beam", pe="rope", seed=0, wers=[9, 11, 19, 39], decode="beam")
    fake_run(root, "rope_hybrid_att", pe="rope", seed=0, wers=[5, 6, 30, 90], loss="hybrid", decode="attention")
    fake_run(root, "rope_hybrid_ctc", pe="rope", seed=0, wers=[8, 9, 15, 30], loss="hybrid", decode="greedy")
    fake_run(root, "none_old", pe="none", seed=0, wers=[20, 20, 30, 80])  # no sidecar: plain label
    runs, _ = load_runs([root])
    labels = sorted(s.label for s in aggregate(runs, "wer"))
    assert labels == ["none/ctc", "rope/ctc", "rope/ctc+beam", "rope/hybrid+attention", "rope/hybrid+greedy"]


def test_cer_metric_and_test_set_choice(tmp_path, sweep):
    fake_run(sweep / "b", "none_s0", pe="none", seed=0, wers=[1, 2, 3, 4], test_set="test_short")
    with pytest.raises(RunDirError, match="several test sets"):
        make_report([sweep], tmp_path / "fig")
    files = make_report([sweep], tmp_path / "fig", test_set="test_short", metric="cer")
    assert files["md"].name == "cer_vs_length.md" and files["png"].exists()
    md = files["md"].read_text()
    # only the run evaluated on test_short is included
    assert "none/ctc" in md and "rope/ctc" not in md and "CER" in md


def test_script_cli(tmp_path, sweep, capsys):
    script = Path(__file__).resolve().parents[2] / "scripts" / "plot_wer_vs_length.py"
    spec = importlib.util.spec_from_file_location("plot_wer_vs_length", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "fig"
    assert mod.main([str(sweep / "a"), str(sweep / "b"), "--out", str(out), "--test-set", "test_long"]) == 0
    assert {p.name for p in out.iterdir()} == {"wer_vs_length.png", "wer_vs_length.csv", "wer_vs_length.md"}
    assert "rope/ctc" in capsys.readouterr().out
    assert mod.main([str(tmp_path / "empty_dir_missing"), "--out", str(out)]) == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run_info.json").write_text("{oops")
    (bad / "eval" / "t").mkdir(parents=True)
    (bad / "eval" / "t" / "buckets.csv").write_text("bucket,lo,hi,mean_duration,wer\n")
    assert mod.main([str(bad), "--out", str(out)]) == 2
    assert "run_info.json:1: invalid JSON" in capsys.readouterr().err


def test_a_scored_system_without_a_seed_shows_a_dash_not_none(tmp_path, sweep):
    # score.py writes "seed": null for another toolkit's model; the table once printed "None"
    fake_run(sweep / "external", "whisper", pe=None, seed=None, wers=[9, 9, 9, 9], loss=None)
    info = json.loads((sweep / "external" / "whisper" / "run_info.json").read_text())
    (sweep / "external" / "whisper" / "run_info.json").write_text(
        json.dumps({**info, "label": "whisper", "system": "external"}))
    md = make_report([sweep], tmp_path / "fig")["md"].read_text()
    row = next(line for line in md.splitlines() if line.startswith("| whisper |"))
    assert row.startswith("| whisper | – |") and "None" not in md
