"""prepare_on_rank_zero: rank 0 prepares the run's data once, the other ranks wait and then read."""

from __future__ import annotations

import threading
import time

import pytest

from asr_pe.run_folder import DATA_READY
from asr_pe.training.run_dir import prepare_on_rank_zero


def test_other_ranks_wait_for_rank_zero_then_prepare(tmp_path):
    order: list[str] = []

    def prepare(rank):
        def run():
            if rank == 0:
                time.sleep(0.3)  # rank 0 is slow; rank 1 must not start before it is done
                (tmp_path / "tokenizer.json").write_text("{}")
            else:
                assert (tmp_path / "tokenizer.json").exists(), "rank 1 ran before rank 0 had written its files"
            order.append(f"rank{rank}")
            return rank
        return run

    results = {}
    waiter = threading.Thread(target=lambda: results.update(r1=prepare_on_rank_zero(
        tmp_path, "k", 1, prepare(1), poll_s=0.02)))
    waiter.start()
    results["r0"] = prepare_on_rank_zero(tmp_path, "k", 0, prepare(0))
    waiter.join(5)
    assert order == ["rank0", "rank1"] and results == {"r0": 0, "r1": 1}


def test_a_failure_on_rank_zero_stops_the_others_with_its_message(tmp_path):
    def broken():
        raise FileNotFoundError("data/librispeech/train-clean-100.jsonl: run the recipe's prepare stage")

    with pytest.raises(FileNotFoundError):
        prepare_on_rank_zero(tmp_path, "k", 0, broken)
    with pytest.raises(RuntimeError, match="rank 0 failed.*train-clean-100.jsonl"):
        prepare_on_rank_zero(tmp_path, "k", 1, lambda: None, poll_s=0.01)


def test_a_marker_of_other_data_is_not_taken_and_waiting_times_out(tmp_path):
    (tmp_path / DATA_READY).write_text('{"key": "other", "error": null}')
    with pytest.raises(TimeoutError, match="rank 1: rank 0 did not prepare"):
        prepare_on_rank_zero(tmp_path, "k", 1, lambda: None, timeout_s=0.1, poll_s=0.02)


def test_checkpoints_are_replaced_atomically_in_their_own_folder(tmp_path, monkeypatch):
    """A save killed half-way leaves the previous checkpoint whole (and no temporary file in $TMPDIR)."""
    import torch

    from asr_pe.training.callbacks import RunFolderCheckpointIO

    elsewhere = tmp_path / "tmpdir"
    elsewhere.mkdir()
    monkeypatch.setenv("TMPDIR", str(elsewhere))
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    io = RunFolderCheckpointIO()
    io.save_checkpoint({"global_step": 1, "w": torch.ones(3)}, ckpt)
    assert io.load_checkpoint(ckpt, weights_only=True)["global_step"] == 1

    import asr_pe.io as atomic

    real_replace = atomic.os.replace

    def killed(*args):  # the job dies just before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"global_step": 2, "w": torch.zeros(3)}, ckpt)
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    assert io.load_checkpoint(ckpt, weights_only=True)["global_step"] == 1
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["last.ckpt"] and not list(elsewhere.iterdir())
