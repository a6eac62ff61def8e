"""DDP on 2 CPU processes (gloo), through the real launcher: a NaN on one rank, padded
validation batches and data preparation on rank 0 (see ddp_probe.py for what each rank records)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from asr_pe.data.manifest import read_manifest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.mark.slow
def test_ddp_nan_on_one_rank_skips_the_step_on_both_and_validation_counts_each_utterance_once(
        tiny_synth_root, tmp_path):
    run = tmp_path / "run"
    nan_rank, nan_step = 1, 1
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(HERE / "ddp_probe.py"), str(run), str(tiny_synth_root),
                        str(nan_rank), str(nan_step)], capture_output=True, text=True, cwd=REPO, env=env,
                       timeout=600)  # a rank left waiting in a collective would hang: the timeout fails the test
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    probes = [json.loads((run / f"probe_rank{k}.json").read_text()) for k in (0, 1)]

    # both ranks skipped the same step (the NaN was on rank 1 only); the weights stayed equal
    assert probes[0]["skipped_steps"] == probes[1]["skipped_steps"] == [nan_step]
    assert probes[0]["weight_sum"] == pytest.approx(probes[1]["weight_sum"], rel=0, abs=1e-9)
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert int(ckpt["state_dict"]["skipped_batches"]) == 1
    # each rank trained on its own batches
    for (step0, ids0), (step1, ids1) in zip(probes[0]["train"], probes[1]["train"]):
        assert step0 == step1 and not set(ids0) & set(ids1)

    # validation: every dev utterance scored exactly once per validation, across the two ranks
    dev = {u.id for u in read_manifest(next(Path(tiny_synth_root).rglob("dev.jsonl")))}
    n_val = len(probes[0]["val_sums"])
    assert n_val == len(probes[1]["val_sums"]) >= 2
    scored = probes[0]["val"] + probes[1]["val"]
    assert sorted(scored) == sorted(list(dev) * n_val), "a padded batch was scored, or an utterance missed"
    # the logged CER is total character errors over total reference characters of both ranks
    with open(run / "logs" / "metrics.csv") as f:
        logged = [float(row["val/cer"]) for row in csv.DictReader(f) if row.get("val/cer")]
    expected = []
    for s0, s1 in zip(probes[0]["val_sums"], probes[1]["val_sums"]):
        errors, chars = s0[2] + s1[2], s0[3] + s1[3]
        expected.append(100.0 * errors / chars)
    assert logged == pytest.approx(expected, rel=1e-6)

    # rank 0 prepared the data and evaluated; the run is complete
    assert json.loads((run / ".data_ready.json").read_text())["error"] is None
    assert (run / "eval" / "test" / "buckets.csv").exists() and (run / "eval" / "done.json").exists()
