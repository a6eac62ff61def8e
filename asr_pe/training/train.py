"""``train(cfg)``: one run's life, in the order `asr_pe.training.run.Run` owns.

``train.py`` (Hydra) and the tests call it with a composed config; it returns the run folder.
What each step guarantees, and why in this order: `asr_pe.training.run`."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from .progress import conventional_logging
from .run import Run


def train(cfg: DictConfig) -> Path:
    """Train one model as configured (or continue it), evaluate it, mark it done."""
    conventional_logging()
    with Run.open(cfg) as run:       # refused starts write nothing; the folder is locked and planned
        if run.finished:             # resume=auto on a run whose evaluation is done
            print(f"[asr_pe] finished run, skipped: {run.dir}")
            return run.dir
        with run.first_start():      # a failure before training leaves the folder as it found it
            job = run.prepare()      # data, model, run_info.json
        run.fit(job)                 # SIGTERM: exit 143 with last.ckpt; divergence: exit 3; neither evaluated
        run.evaluate()               # every test set, then eval/done.json
    print(f"[asr_pe] run directory: {run.dir}")  # the lock is given back when the block ends
    return run.dir


__all__ = ["train"]
