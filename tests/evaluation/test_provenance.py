"""Checkpoint records of results, and which results are stale (asr_pe/evaluation/provenance.py)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from asr_pe.evaluation.provenance import checkpoint_record, stale_sets
from asr_pe.inference.run_loading import CheckpointError

REPO = Path(__file__).resolve().parents[2]


def write_result(run: Path, name: str, record) -> None:
    out = run / "eval" / name
    out.mkdir(parents=True)
    (out / "per_utt.jsonl").write_text('{"id": "u1"}\n')
    (out / "buckets.csv").write_text("bucket\n")
    (out / "buckets.meta.json").write_text(json.dumps({"checkpoint": record}))


def test_record_names_the_file_its_step_and_its_bytes(tmp_path):
    ckpt = tmp_path / "best.ckpt"
    torch.save({"global_step": 1234, "state_dict": {"w": torch.ones(3)}}, ckpt)
    assert checkpoint_record(ckpt) == {"name": "best.ckpt", "global_step": 1234,
                                       "sha256": hashlib.sha256(ckpt.read_bytes()).hexdigest()}
    torch.save({"w": torch.ones(3)}, ckpt)  # a bare state dict has no step
    assert checkpoint_record(ckpt)["global_step"] is None


@pytest.mark.parametrize("content", [b"not a checkpoint at all", b""])
def test_a_file_that_does_not_load_is_one_checkpoint_error_naming_it(tmp_path, content):
    # the record is taken before the model loads: torch's own error (a non-zip file cannot be
    # mmapped) would be a traceback instead of the entry points' one line
    ckpt = tmp_path / "best.ckpt"
    ckpt.write_bytes(content)
    with pytest.raises(CheckpointError, match=rf"^{ckpt}: not a readable checkpoint .*; try this$"):
        checkpoint_record(ckpt, hint="try this")
    torch.save([1, 2], ckpt)  # loads, but is no checkpoint
    with pytest.raises(CheckpointError, match="not a checkpoint \\(holds a list"):
        checkpoint_record(ckpt)


def test_stale_sets_compare_bytes_not_times(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    ckpt = run / "checkpoints" / "best.ckpt"
    torch.save({"global_step": 5}, ckpt)
    write_result(run, "test", checkpoint_record(ckpt))
    write_result(run, "old", {"name": "best.ckpt", "global_step": 2, "sha256": "0" * 64})
    write_result(run, "gone", {"name": "step8.ckpt", "global_step": 8, "sha256": "1" * 64})
    write_result(run, "unrecorded", None)
    assert stale_sets(run, ["test", "old", "gone", "unrecorded", "missing"]) == ["old", "gone", "unrecorded",
                                                                                  "missing"]
    ckpt.touch()  # a new modification time, the same bytes: still current
    assert stale_sets(run, ["test"]) == []
    (run / "eval" / "test" / "buckets.csv").unlink()  # killed while writing: evaluated again
    assert stale_sets(run, ["test"]) == ["test"]


def test_cli_prints_the_stale_sets_and_names_a_missing_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    cmd = [sys.executable, "-m", "asr_pe.evaluation.provenance"]
    ok = subprocess.run([*cmd, str(run), "a", "b"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert ok.returncode == 0 and ok.stdout.split() == ["a", "b"]
    bad = subprocess.run([*cmd, str(tmp_path / "nope"), "a"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == f"error: {tmp_path / 'nope'}: no such run folder (train it first)"
