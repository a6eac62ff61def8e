"""A training that ends early never looks finished: ``train.py`` stopped by a real SIGTERM, or
diverged (non-finite losses past ``nonfinite.*``), exits non-zero with one error line, is not
evaluated and gets no ``eval/done.json``; a stopped run resumes, and its results then record the
checkpoint they came from (name, step, SHA-256 of the file)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from asr_pe.data.manifest import read_manifest
from asr_pe.evaluation.provenance import file_sha256
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides

REPO = Path(__file__).resolve().parents[2]


def tiny_run(root: Path, run: Path) -> list[str]:
    return TINY_MODEL + synth_overrides(root) + [
        f"run_dir={run}", "pe=none", "encoder=transformer", "encoder.n_layers=1", "data.num_workers=0",
        "data.spec_augment=null", "trainer.enable_progress_bar=false", "eval.n_boot=20"]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def test_sigterm_mid_training_exits_143_unevaluated_and_the_resumed_run_records_its_checkpoint(
        tiny_synth_root, tmp_path):
    run = tmp_path / "run"
    last = run / "checkpoints" / "last.ckpt"
    # no validation: the signal lands in a training step (a stop in the middle of a validation
    # keeps the previous last.ckpt instead)
    overrides = tiny_run(tiny_synth_root, run) + ["checkpoint.every_n_train_steps=2", "+trainer.limit_val_batches=0"]
    proc = subprocess.Popen([sys.executable, "train.py", *overrides, "trainer.max_steps=100000"], cwd=REPO,
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not last.exists():  # training is under way once the first step checkpoint is written
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "error: training stopped by SIGTERM" in err and "Traceback" not in err, err[-3000:]
    step = torch.load(last, weights_only=True, map_location="cpu")["global_step"]
    assert 2 <= step < 100000
    assert re.search(rf"step {step} saved to \S*last\.ckpt", err), err[-2000:]  # the step reached, saved
    assert not (run / "eval").exists(), "a stopped training was evaluated"

    # resumed to a finish: evaluated, and every result names the checkpoint it was computed from
    # one thread, as the stopped process had (OMP_NUM_THREADS=1): a thread count changes the last digits
    train(compose_train(overrides + [f"trainer.max_steps={step + 2}", "resume=auto", "threads=1"]))
    done = json.loads((run / "eval" / "done.json").read_text())
    assert done["test_sets"] == ["test"]
    # no validation, so no best.ckpt: the evaluation falls back to last.ckpt, a step checkpoint of
    # the resumed part (every 2 steps: it need not hold the very last step, and the record says which)
    stored = torch.load(last, weights_only=True, map_location="cpu")["global_step"]
    assert step < stored <= step + 2
    assert done["checkpoint"] == {"name": "last.ckpt", "global_step": stored, "sha256": file_sha256(last)}
    meta = json.loads((run / "eval" / "test" / "buckets.meta.json").read_text())
    assert meta["checkpoint"] == done["checkpoint"]
    manifest = read_manifest(next(Path(tiny_synth_root).rglob("test.jsonl")))
    scored = [json.loads(line)["id"] for line in (run / "eval" / "test" / "per_utt.jsonl").read_text().splitlines()]
    assert sorted(scored) == sorted(u.id for u in manifest) and meta["utterances"] == len(manifest)

    # the signal came at a moment of its own; the weights are still those of a run never stopped
    # (dropout is on: the step's random state is in the checkpoint)
    full = tmp_path / "full"
    train(compose_train(tiny_run(tiny_synth_root, full) + ["checkpoint.every_n_train_steps=2",
                                                           "+trainer.limit_val_batches=0",
                                                           f"trainer.max_steps={stored}", "eval_after_train=false",
                                                           "threads=1"]))
    a, b = (torch.load(r / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu") for r in (full, run))
    assert a["global_step"] == b["global_step"] == stored
    differ = [k for k in a["state_dict"] if not torch.equal(a["state_dict"][k], b["state_dict"][k])]
    assert not differ, f"{len(differ)} of {len(a['state_dict'])} parameter tensors differ after the SIGTERM and resume"


def test_a_diverged_run_stops_with_exit_3_and_is_neither_evaluated_nor_done(tiny_synth_root, tmp_path):
    # lr 1e30: the first step throws the weights to ~1e30, every later loss is non-finite
    run = tmp_path / "run"
    r = subprocess.run([sys.executable, "train.py", *tiny_run(tiny_synth_root, run), "optim.lr=1e30",
                        "optim.schedule=constant", "trainer.max_steps=8", "nonfinite.grace_steps=5"],
                       cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    # grace 5 x 0.2: the second skipped step (of 3) crosses the limit
    assert lines == [lines[0]] and "training diverged: 2 of 3 steps skipped for a non-finite loss" in lines[0], (
        r.stderr[-3000:])
    assert "Traceback" not in r.stderr
    assert not (run / "eval").exists()


def test_nonfinite_limits_and_the_decision():
    from asr_pe.training.stops import NonFiniteConfigError, divergence, nonfinite_limits

    limits = nonfinite_limits({})
    assert divergence(11, 12, 11, limits)  # the 2-rank run of 11 skipped steps in 12
    assert divergence(10, 12, 10, limits) is None  # 10 = 0.2 x the 50 grace steps: not past it
    assert divergence(1, 6, 1, limits) is None
    assert divergence(201, 1000, 1, limits) and divergence(200, 1000, 1, limits) is None
    assert "in a row" in divergence(101, 100000, 101, limits)
    off = nonfinite_limits({"max_fraction": None, "max_consecutive": None})
    assert divergence(999, 1000, 999, off) is None
    for bad in ({"max_fraction": -1}, {"grace_steps": 1.5}, {"max_consecutive": "x"}, {"max_skips": 1}):
        with pytest.raises(NonFiniteConfigError, match="nonfinite"):
            nonfinite_limits(bad)
