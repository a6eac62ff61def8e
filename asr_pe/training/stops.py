"""Trainings that end without a finished model must not look finished.

Two ways a ``trainer.fit`` ends early, each turned into a `TrainingStopped` error that ``train.py``
reports in one line with its own exit code, before any evaluation and without ``eval/done.json``:

* SIGTERM (what a cluster sends before it kills or preempts a job). The ranks agree on the stop
  (`asr_pe.training.callbacks.SigtermStop`), finish the current step and its validation, and
  Lightning raises ``SIGTERMException`` on each (a ``SystemExit`` without a code, so the process
  would exit 0 and a recipe would go on to evaluate a half-trained model). `SigtermStop` writes
  ``last.ckpt`` of the step reached (only from the training stage), and `fit_or_stop` raises `TrainingInterrupted` (exit 143 = 128 + SIGTERM, what a shell reports
  for a process killed by it). A signal that arrives after the last step (``fit`` then returns
  normally) is reported the same way: the job is being stopped, the evaluation is left to the
  resumed run. Under SLURM nothing else changes: a requeued job resumes from ``last.ckpt``.
* Divergence: a non-finite loss on any rank skips the step on every rank (`asr_pe.training.module`),
  so ``skipped_batches`` is the same count on every rank. `NonFiniteGuard` stops the run
  (`TrainingDiverged`, exit 3) when more than ``nonfinite.max_fraction`` of the steps so far were
  skipped (counted over at least ``nonfinite.grace_steps`` steps, so a few early skips pass) or
  ``nonfinite.max_consecutive`` steps in a row were. Every rank takes the same decision at the same
  step, so no rank is left waiting in a collective.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
from collections.abc import Mapping
from typing import Any

from lightning.pytorch.utilities.exceptions import SIGTERMException

from asr_pe.errors import UserError

log = logging.getLogger(__name__)

# conf/train.yaml's nonfinite: section repeats these (runs configured before it existed use them)
NONFINITE_DEFAULTS = {"max_fraction": 0.2, "grace_steps": 50, "max_consecutive": 100}


class TrainingStopped(UserError, RuntimeError):
    """Training ended without a finished model; ``exit_code`` is what ``train.py`` exits with."""

    exit_code = 1


class TrainingInterrupted(TrainingStopped):
    exit_code = 143  # 128 + SIGTERM


class TrainingDiverged(TrainingStopped):
    exit_code = 3


class NonFiniteConfigError(UserError, ValueError):
    """A bad ``nonfinite.*`` setting."""


def nonfinite_limits(section: Mapping[str, Any] | None) -> dict[str, float | int | None]:
    """`NONFINITE_DEFAULTS` updated by the config's ``nonfinite:`` section; a null limit is off."""
    limits = dict(NONFINITE_DEFAULTS)
    section = dict(section or {})
    unknown = sorted(set(section) - set(limits))
    if unknown:
        raise NonFiniteConfigError(f"unknown nonfinite setting(s) {unknown}; known: {sorted(limits)}")
    limits.update(section)
    for key, value in limits.items():
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        if not ok or (key != "max_fraction" and value != int(value)):
            raise NonFiniteConfigError(f"nonfinite.{key}={value!r}: must be "
                                       + ("a fraction >= 0" if key == "max_fraction" else "a whole number >= 0")
                                       + " or null (off)")
    return limits


def divergence(skipped: int, steps: int, consecutive: int, limits: Mapping[str, Any]) -> str | None:
    """Why a run with ``skipped`` of ``steps`` steps skipped (the last ``consecutive`` in a row)
    counts as diverged, or None."""
    if limits.get("max_consecutive") is not None and consecutive > int(limits["max_consecutive"]):
        return (f"{consecutive} steps in a row skipped for a non-finite loss "
                f"(nonfinite.max_consecutive={int(limits['max_consecutive'])})")
    fraction = limits.get("max_fraction")
    if fraction is not None and skipped > float(fraction) * max(steps, int(limits.get("grace_steps") or 0)):
        return (f"{skipped} of {steps} steps skipped for a non-finite loss (nonfinite.max_fraction={fraction:g} "
                f"of at least nonfinite.grace_steps={int(limits.get('grace_steps') or 0)} steps)")
    return None


@contextlib.contextmanager
def sigterm_stops(message: str):
    """Inside the block a SIGTERM raises `TrainingInterrupted` (``message``; exit 143 with one
    ``error:`` line) instead of Python's default, which ended the process silently: the evaluation
    after training, which Lightning's handler no longer covers. Main thread only (a signal handler
    can be set nowhere else); elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise TrainingInterrupted(message)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _what_was_saved(saver) -> str:
    """What a resume continues from, as it is on disk. A stop outside the training stage saves
    nothing, and before the first step checkpoint there is nothing to continue."""
    if saver is None:
        return "no checkpoint saved by this stop"
    if saver.saved_step is not None:
        return f"step {saver.saved_step} saved to {saver.path}"
    from .resume import checkpoint_step  # reads the step without loading the weights

    step = checkpoint_step(saver.path) if saver.path.is_file() else None
    if step is None:
        return "nothing saved, a resume starts again from step 0"
    return f"the last step checkpoint, step {step}, is kept"


def fit_or_stop(trainer, module, **fit_kwargs) -> None:
    """``trainer.fit``, with a SIGTERM stop raised as `TrainingInterrupted` (see the module docstring)."""
    from .callbacks import SigtermStop

    saver = next((c for c in trainer.callbacks if isinstance(c, SigtermStop)), None)
    try:
        trainer.fit(module, **fit_kwargs)
    except SIGTERMException:
        saved = _what_was_saved(saver)
        raise TrainingInterrupted(f"training stopped by SIGTERM at step {trainer.global_step} ({saved}); not "
                                  "evaluated, the run is not marked done: resume it with resume=auto") from None
    if saver is not None and saver.received:
        raise TrainingInterrupted(f"SIGTERM received as training ended (step {trainer.global_step}); not "
                                  "evaluated, the run is not marked done: resume it with resume=auto to evaluate it")
