"""Tiny end-to-end runs on a generated corpus: loss goes down, evaluation writes its files,
an interrupted run resumes, and the command line turns bad input into one clear line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe import run_folder as rf
from asr_pe.data.manifest import read_manifest, write_manifest
from asr_pe.evaluation.pipeline import evaluate_run as evaluate_with
from asr_pe.inference.device import machine_record
from asr_pe.training.data import resolve_manifests
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides


def evaluate_run(run_dir, overrides=None, device=None):
    """The evaluation as evaluate.py and train.py call it: the run's corpus located by Hydra."""
    return evaluate_with(run_dir, overrides, device, corpus_manifests=resolve_manifests)


REPO = Path(__file__).resolve().parents[2]


def train_losses(run_dir: Path) -> list[float]:
    with open(run_dir / "logs" / "metrics.csv") as f:
        return [float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")]


def epoch_losses(run_dir: Path) -> dict[int, list[float]]:
    with open(run_dir / "logs" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/loss")]
    out: dict[int, list[float]] = {}
    for r in rows:
        out.setdefault(int(float(r["epoch"])), []).append(float(r["train/loss"]))
    return out


def test_ctc_run_learns_and_evaluates(tiny_synth_root, tmp_path):
    run = tmp_path / "run"
    cfg = compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=rope", "encoder=transformer", "trainer.max_steps=60",
        "checkpoint.every_n_train_steps=20", "data.spec_augment=null"])
    train(cfg)
    losses = train_losses(run)
    assert len(losses) == 60
    # Each epoch is a new mix of batches, and a batch's loss grows with its utterances' lengths,
    # so compare whole epochs (the same utterances): the first against the last complete one.
    by_epoch = epoch_losses(run)
    last_complete = max(e for e in by_epoch if len(by_epoch[e]) == len(by_epoch[0]))
    assert last_complete >= 5
    first, last = (sum(by_epoch[e]) / len(by_epoch[e]) for e in (0, last_complete))
    assert last < 0.92 * first, f"CTC loss did not fall: epoch mean {first:.1f} -> {last:.1f}"
    for name in ("config.yaml", "run_info.json", "tokenizer.json", "cmvn.json", "checkpoints/last.ckpt"):
        assert (run / name).exists(), name
    info = json.loads((run / "run_info.json").read_text())
    assert info["pe"] == "rope" and info["loss"] == "ctc" and info["train_max_duration"] <= 5.0
    assert info["machines"] == [machine_record("cpu")]   # what a retrain elsewhere cannot give back bit for bit
    # the layout asr_pe.run_folder defines (and docs/internals.md describes) is what train.py wrote
    written = [rf.config_path(run), rf.run_info_path(run), rf.checkpoint_path(run, rf.LAST), rf.metrics_path(run),
               rf.eval_done_path(run), *(run / name for name in rf.PREPARED_FILES), run / rf.DATA_READY,
               *(rf.result_dir(run, "test") / name for name in (*rf.EVAL_FILES, rf.BUCKETS_META))]
    assert [p for p in written if not p.is_file()] == []
    assert rf.eval_done(run) and rf.result_names(run) == ["test"]
    assert rf.run_label(rf.read_run_info(run)) == rf.run_label(rf.read_config(run)) == "rope/ctc"
    out = run / "eval" / "test"
    for name in ("per_utt.jsonl", "buckets.csv", "buckets.md"):
        assert (out / name).stat().st_size > 0, name
    recs = [json.loads(line) for line in (out / "per_utt.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and {"id", "duration", "ref", "hyp", "errors", "ref_words"} <= set(recs[0])
    # evaluation again with another decoder writes the method into its files
    evaluate_run(run, {"decode": {"method": "beam", "beam": 4}, "eval": {"n_boot": 20, "checkpoint": "last"}})
    meta = json.loads((out / "buckets.meta.json").read_text())
    assert meta["decode"]["method"] == "beam"
    # eval.suffix keeps another evaluation beside it instead of replacing it
    results = evaluate_run(run, {"decode": {"method": "greedy"},
                                 "eval": {"n_boot": 20, "checkpoint": "last", "suffix": "_greedy"}})
    assert list(results) == ["test_greedy"]
    assert json.loads((run / "eval" / "test_greedy" / "buckets.meta.json").read_text())["decode"]["method"] == "greedy"
    assert json.loads((out / "buckets.meta.json").read_text())["decode"]["method"] == "beam"
    with pytest.raises(ValueError, match="eval.suffix='../x'"):
        evaluate_run(run, {"eval": {"suffix": "../x", "checkpoint": "last"}})


def test_training_remedies_train_and_record_the_training_length(tiny_synth_root, tmp_path):
    """Randomized RoPE positions with utterances joined into <= 8 s inputs: the run trains, its
    run_info records the joined length as the training length, and a windowed evaluation runs."""
    run = tmp_path / "run"
    cfg = compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=rope", "encoder=transformer", "trainer.max_steps=4", "eval_after_train=false",
        "encoder.position_map={kind:randomized,max_seconds:100}", "data.concat_max_seconds=8"])
    train(cfg)
    losses = train_losses(run)
    assert len(losses) == 4 and all(loss == loss and loss < 1e4 for loss in losses)
    info = json.loads((run / "run_info.json").read_text())
    report = info["data_report"]
    assert 5.0 < info["train_max_duration"] <= 8.0 + report["train_max_utterance"]
    assert report["train_inputs"] < report["train_used"]
    assert info["remedy"] == "randpos:100+concat:8" and info["label"] == "rope/ctc randpos:100+concat:8"
    results = evaluate_run(run, {"eval": {"n_boot": 10, "checkpoint": "last", "remedy": "window"}})
    assert list(results) == ["test_window"]


def test_resume_continues_the_step_count(tiny_synth_root, tmp_path):
    run = tmp_path / "run"
    base = TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=none", "encoder=transformer", "encoder.n_layers=1",
        "checkpoint.every_n_train_steps=3", "eval_after_train=false"]
    train(compose_train(base + ["trainer.max_steps=6"]))
    ckpt = run / "checkpoints" / "last.ckpt"
    import torch

    assert torch.load(ckpt, weights_only=True, map_location="cpu")["global_step"] == 6
    # a fresh start into a folder that holds a checkpoint is refused
    with pytest.raises(FileExistsError, match="resume=true"):
        train(compose_train(base + ["trainer.max_steps=9"]))
    train(compose_train(base + ["trainer.max_steps=9", "resume=true"]))
    assert torch.load(ckpt, weights_only=True, map_location="cpu")["global_step"] == 9
    with open(run / "logs" / "metrics.csv") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f) if r.get("train/loss")]
    assert steps == list(range(9)), f"logged steps {steps}: the resumed run must continue at step 6"
    # how batches are loaded may change on resume; what the model is may not
    train(compose_train(base + ["trainer.max_steps=10", "resume=true", "data.num_workers=0"]))
    assert torch.load(ckpt, weights_only=True, map_location="cpu")["global_step"] == 10
    with pytest.raises(ValueError, match="'data' differs"):
        train(compose_train(base + ["trainer.max_steps=12", "resume=true", "data.max_batch_seconds=7"]))
    # changing the model on resume is refused with a clear message
    with pytest.raises(ValueError, match="'pe' differs"):
        train(compose_train(base + ["trainer.max_steps=12", "resume=true", "pe=rope"]))


def run_cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_cli_bad_manifest_names_file_and_line(tiny_synth_root, tmp_path):
    run = tmp_path / "run"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=none", "encoder=transformer", "encoder.n_layers=1", "trainer.max_steps=2",
        "eval_after_train=false"]))
    bad = tmp_path / "bad.jsonl"
    dev = read_manifest(next(Path(tiny_synth_root).glob("synth/*/dev.jsonl")))
    write_manifest(bad, dev[:1])
    with open(bad, "a") as f:
        f.write("{not json\n")
    r = run_cli("evaluate.py", f"run={run}", f"data.test={bad}")
    assert r.returncode == 2
    assert f"{bad}:2:" in r.stderr and "Traceback" not in r.stderr


def test_attention_diagnostics_maps_per_layer_and_stats_per_bucket(tiny_synth_root, tmp_path):
    run = tmp_path / "run"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=alibi", "encoder=transformer", "trainer.max_steps=2", "eval_after_train=false"]))
    utt = read_manifest(next(Path(tiny_synth_root).glob("synth/*/test.jsonl")))[-1]
    r = run_cli("scripts/plot_attention.py", f"run={run}", f"utt={utt.id}", f"out={tmp_path / 'maps'}",
                "checkpoint=last")
    assert r.returncode == 0, r.stderr
    pngs = sorted((tmp_path / "maps").glob("layer*.png"))
    assert [p.name for p in pngs] == ["layer0.png", "layer1.png"] and all(p.stat().st_size > 1000 for p in pngs)
    r = run_cli("scripts/plot_attention.py", f"run={run}", "utt=nope", "checkpoint=last")
    assert r.returncode != 0 and "'nope' is not in the test sets" in r.stderr
    # attention statistics per duration bucket: one row per utterance x layer x head
    r = run_cli("scripts/attention_vs_length.py", f"run={run}", "per_bucket=1", f"out={tmp_path / 'stats'}",
                "checkpoint=last")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "stats" / "attention_stats.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    utts = {row["utt"] for row in rows}
    assert len(rows) == len(utts) * 2 * 4 and len(utts) >= 2          # 2 layers x 4 heads (TINY_MODEL)
    assert all(0 <= float(row["norm_entropy"]) <= 1 + 1e-6 and 0 <= float(row["local_mass"]) <= 1 + 1e-6
               for row in rows)
    md = (tmp_path / "stats" / "attention_stats.md").read_text()
    assert "## mean attended distance (s)" in md and "| layer 0 | layer 1 | all |" in md
    r = run_cli("scripts/attention_vs_length.py", f"run={run}", "per_bucket=0")
    assert r.returncode != 0 and "per_bucket must be a positive integer" in r.stderr


def test_cli_unknown_pe_is_clear():
    r = run_cli("train.py", "pe=nope", "trainer.max_steps=1")
    assert r.returncode != 0
    assert "pe/nope" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # 1 min on 2 cores: .ci/run runs it after make test
def test_study_runner_skips_finished_and_resumes_interrupted(tiny_synth_root, tmp_path):
    """`train.py -m experiment=synth_study`: one folder per (pe, seed); re-running skips finished
    runs, and a run without evaluation files continues from its checkpoint."""
    sweep = tmp_path / "study"
    args = ["train.py", "-m", "experiment=synth_study", "pe=none", "seed=0", f"hydra.sweep.dir={sweep}",
            "data.corpus.longform.durations=[8]", "trainer.max_steps=3", "encoder.n_layers=1",
            "checkpoint.every_n_train_steps=3"] + TINY_MODEL + synth_overrides(tiny_synth_root)
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    # one line per Lightning record under Hydra's logging, and no third-party tip
    output = r.stdout + r.stderr
    assert output.count("max_steps=3` reached") == 1 and output.count("Seed set to 0") == 1, output[-3000:]
    assert "Tip:" not in output
    # progress by global step, plain lines in a log (no \r), none of the noise a user cannot act on
    assert "[asr_pe] step 3/3 (100%)" in r.stdout and "\r" not in output, output[-3000:]
    for noise in ("Total FLOPs: 0", "LeafSpec", "smaller than the logging interval"):
        assert noise not in output, noise
    run = sweep / "none_ctc_s0"
    for test_set in ("test", "longform"):
        assert (run / "eval" / test_set / "buckets.csv").exists(), test_set
    done = json.loads((run / "eval" / "done.json").read_text())
    assert done["test_sets"] == ["longform", "test"] and done["checkpoint"]["name"] in ("best.ckpt", "last.ckpt")
    r = run_cli(*args)
    assert r.returncode == 0 and "finished run, skipped" in r.stdout
    # interrupted after training, before evaluation: resumes (nothing left to train) and evaluates
    import shutil

    shutil.rmtree(run / "eval")
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "finished run, skipped" not in r.stdout
    # the resume says what happens to the metric log, instead of Lightning's "will be deleted"
    assert "Previous log files" not in r.stdout + r.stderr
    assert "[asr_pe] logs/metrics.csv keeps the rows of steps before 3" in r.stdout
    assert (run / "eval" / "longform" / "buckets.csv").exists()
    # killed between two test sets (test scored, longform not begun, so no done.json): not
    # finished; the re-run evaluates again and longform gets its files
    shutil.rmtree(run / "eval" / "longform")
    (run / "eval" / "done.json").unlink()
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "finished run, skipped" not in r.stdout
    assert (run / "eval" / "longform" / "buckets.csv").exists() and (run / "eval" / "done.json").exists()


@pytest.mark.slow
def test_ddp_two_cpu_processes(tiny_synth_root, tmp_path):
    """trainer=ddp on 2 CPU processes (gloo): each rank trains on its own share of batches and
    rank 0 writes the checkpoint and the evaluation."""
    run = tmp_path / "run"
    r = run_cli("train.py", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
                "trainer.precision=32-true", "trainer.max_steps=3", f"run_dir={run}", "pe=rope",
                "encoder=transformer", "data.num_workers=0", *TINY_MODEL, *synth_overrides(tiny_synth_root))
    assert r.returncode == 0, r.stderr[-3000:]
    import torch

    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3
    assert (run / "eval" / "test" / "buckets.csv").exists()
