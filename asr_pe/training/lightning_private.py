"""The private Lightning names the toolkit relies on, listed and checked in one place.

Lightning gives no public way to do a few things the run's guarantees need: resume at an epoch
boundary with the batch order an uninterrupted run would have (the epoch-boundary functions below
adjust the fit loop's progress counters), save ``last.ckpt`` after the final step whatever the
interval (`asr_pe.training.checkpoints`), and list the precision flags it accepts
(`asr_pe.training.config_checks`). A Lightning release may rename or change any of them without
notice, and a changed counter would not fail: it would silently train another batch order.
So ``pyproject.toml`` pins the Lightning minor versions the tests ran on (`TESTED`), and
`check_lightning` (called first by ``train()``) refuses another one with one line, unless
``ASR_PE_UNTESTED_LIGHTNING=1`` says the user takes that risk; `missing_private_names` is what
``tests/training/test_lightning_private.py`` checks against the installed Lightning.

**Epoch boundaries** (here too, since they are nothing but private loop state): Lightning 2.6's
loop counters at an epoch boundary, put in the states it resumes right.

A resumed run must continue with the batches an uninterrupted run sees next and log each step once
(`asr_pe.training.data.ResumableLoader`, `asr_pe.training.metrics_log`). Lightning restores its
loops from the progress counters in the checkpoint, and three boundary cases go wrong in 2.6.6 (all
found by a kill/SIGTERM/resume stress test that compared every batch with an uninterrupted run's,
and checked through real resumes in ``tests/integration/test_epoch_order.py``):

* **A stop between two epochs.** Its SIGTERM stop is raised after an epoch is counted as completed
  (``FitLoop.on_advance_end``; under DDP also at the next epoch's first batch, before it draws one).
  Saved as they stand, the loops restore as an epoch in progress with all its batches done:
  Lightning runs it again without a batch, counts it, and trains the one after it, so the resumed
  run skipped an epoch's batch order and labelled every row one step late. `SaveOnSigterm`
  (`asr_pe.training.stops`) saves such a stop as `as_saved_at_batch_end` puts it: the state Lightning
  itself saves at an epoch's last batch (``on_train_batch_end``).
* **A fit ended by ``max_steps`` in the middle of an epoch**, saved as it ended (``last.ckpt`` at
  ``on_train_end``, when the last step was not a checkpoint step). Lightning counts that epoch as
  completed, so a run continued with a larger ``max_steps`` started the next epoch and never
  trained the rest of this one. `LastCheckpoint` (`asr_pe.training.checkpoints`) saves it through
  `as_saved_at_batch_end` too.
* **The epoch after a resume from an epoch's last batch** (with a validation at epoch ends).
  Lightning finishes the restored epoch's count but starts the next one without marking it ready
  and started (its restart stage is still "mid-epoch"), so every checkpoint of that epoch says no
  epoch is in progress; a resume from one of them trained that epoch's batch order a second time.
  `EpochCountsAfterResume` marks it.
"""

from __future__ import annotations

import os

from lightning.fabric.utilities.data import _set_sampler_epoch
from lightning.pytorch.callbacks import Callback

from asr_pe.errors import UserError

TESTED = ("2.6",)  # Lightning major.minor versions the test suite ran on; pyproject.toml pins the same

# owner (module:attribute path) -> the private (or loop-internal) names read or overridden there
PRIVATE = {
    "lightning.pytorch.loops.fit_loop:_FitLoop": ("epoch_progress", "epoch_loop", "_combined_loader"),
    "lightning.pytorch.loops.training_epoch_loop:_TrainingEpochLoop": ("batch_progress", "_batches_that_stepped"),
    "lightning.pytorch.callbacks:ModelCheckpoint": ("_save_checkpoint", "_save_last_checkpoint",
                                                    "_monitor_candidates", "_last_global_step_saved"),
    "lightning.fabric.connector:_convert_precision_to_unified_args": (),
    "lightning.fabric.utilities.data:_set_sampler_epoch": (),
}


class UntestedLightningError(UserError, RuntimeError):
    """The installed Lightning is not a version the resume guarantees were tested with."""


def lightning_version() -> str:
    import lightning

    return lightning.__version__


def check_lightning(version: str | None = None) -> None:
    version = version or lightning_version()
    if ".".join(version.split(".")[:2]) in TESTED or os.environ.get("ASR_PE_UNTESTED_LIGHTNING") == "1":
        return
    raise UntestedLightningError(
        f"lightning {version} is not a version asr_pe's resume and batch-order guarantees were tested with "
        f"({', '.join(t + '.x' for t in TESTED)}; asr_pe/training/lightning_private.py lists the private names "
        f"they rely on): install one (pip install 'lightning>={TESTED[0]},<{_next_minor(TESTED[-1])}') or set "
        f"ASR_PE_UNTESTED_LIGHTNING=1 to go on at your own risk")


def _next_minor(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


def missing_private_names() -> list[str]:
    """The names of `PRIVATE` the installed Lightning lacks ("module:owner.name")."""
    import importlib

    missing = []
    for owner, names in PRIVATE.items():
        module, _, attr = owner.partition(":")
        obj = getattr(importlib.import_module(module), attr, None)
        if obj is None:
            missing.append(owner)
            continue
        for name in names:
            # instance attributes are set in __init__: look for their assignment in the class' module
            if not hasattr(obj, name) and f"self.{name} =" not in _module_source(obj):
                missing.append(f"{owner}.{name}")
    return missing


def _module_source(obj) -> str:
    import inspect

    try:
        return inspect.getsource(inspect.getmodule(obj))
    except (OSError, TypeError):
        return ""


def precision_flag_error(value) -> str | None:
    """None when Lightning takes ``value`` as ``trainer.precision``, else the values it allows."""
    from lightning.fabric.connector import _convert_precision_to_unified_args

    try:
        _convert_precision_to_unified_args(value)
    except ValueError as e:
        return str(e).split("Allowed precision values:")[-1].strip()
    return None


# ---------------------------------------------------------------------- epoch boundaries


def at_epoch_end(fit_loop) -> bool:
    """Whether the fit loop stands between two epochs: the last one counted as completed, the next
    one not started. Lightning 2.6 raises the SIGTERM stop there (``FitLoop.on_advance_end``) when
    the signal arrives during an epoch's last batch or its validation, and a fit ended by
    ``max_steps`` stands there too, wherever in the epoch the last step was."""
    epochs = fit_loop.epoch_progress.total
    return epochs.ready == epochs.started == epochs.processed == epochs.completed > 0


def at_epoch_start(fit_loop) -> bool:
    """Whether an epoch has started but drawn no batch yet. Under DDP Lightning 2.6 raises the SIGTERM
    stop there too: ranks agree on it at the start of each batch (``_broadcast_sigterm_tensor``)."""
    epochs = fit_loop.epoch_progress.total
    return (epochs.ready == epochs.started == epochs.processed + 1 == epochs.completed + 1
            and epochs.completed > 0 and fit_loop.epoch_loop.batch_progress.current.ready == 0)


def back_to_epoch_end(fit_loop, batches_per_epoch: int) -> None:
    """Undo the start of an epoch that has drawn no batch: the loops as `at_epoch_end` finds them."""
    assert at_epoch_start(fit_loop), "back_to_epoch_end needs an epoch started without a batch"
    for counts in (fit_loop.epoch_progress.total, fit_loop.epoch_progress.current):
        counts.ready -= 1
        counts.started -= 1
    batches = fit_loop.epoch_loop.batch_progress
    batches.current.ready = batches.current.started = batches.current.processed = batches.current.completed = \
        int(batches_per_epoch)
    batches.is_last_batch = True


def as_saved_at_batch_end(fit_loop) -> None:
    """Put the loops of an epoch counted as completed (all its batches run, or ``max_steps`` reached
    in it) back in the state Lightning itself saves at the end of the batch just run
    (``on_train_batch_end``: that batch and the epoch not yet counted as completed, the logging step
    not yet advanced), from which it resumes at the next batch: the next epoch's first after an
    epoch's last batch (with or without a validation at that epoch's end), else the same epoch's
    next one. (A CI failure of
    ``test_a_killed_run_resumes_alone_and_logs_each_step_once`` was the stop saved as it stood: a
    SIGTERM at step 192, an epoch's end; the resumed run's rows started at 193.) The train loader's
    sampler goes back to that epoch too, where a next one had started: the checkpoint stores the
    sampler's epoch (`asr_pe.training.data.ResumableLoader`)."""
    assert at_epoch_end(fit_loop), "as_saved_at_batch_end needs an epoch counted as completed"
    for counts in (fit_loop.epoch_progress.total, fit_loop.epoch_progress.current):
        counts.processed -= 1
        counts.completed -= 1
    epoch_loop = fit_loop.epoch_loop
    for counts in (epoch_loop.batch_progress.total, epoch_loop.batch_progress.current):
        counts.completed -= 1
    epoch_loop._batches_that_stepped -= 1  # Lightning adds it back when it resumes from that state
    finished = fit_loop.epoch_progress.current.completed  # the index of the epoch of the batch just run
    for loader in fit_loop._combined_loader.flattened if fit_loop._combined_loader is not None else []:
        _set_sampler_epoch(loader, finished)  # what Lightning had set at that epoch's start


def make_resumable(trainer) -> None:
    """Before saving a checkpoint outside a training batch (a SIGTERM stop, the end of the fit): put
    the loops where they stand at an epoch boundary in the state Lightning resumes right; a no-op
    inside an epoch."""
    if at_epoch_start(trainer.fit_loop):
        back_to_epoch_end(trainer.fit_loop, trainer.num_training_batches)
    if at_epoch_end(trainer.fit_loop):
        as_saved_at_batch_end(trainer.fit_loop)


class EpochCountsAfterResume(Callback):
    """Marks the epoch being trained as ready and started when Lightning has not (the second case of
    the module docstring): at a training batch no epoch can be without a start. A no-op otherwise."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        epochs = trainer.fit_loop.epoch_progress
        if epochs.total.started == epochs.total.processed:
            epochs.increment_ready()
            epochs.increment_started()
