"""Lightning 2.6's loop counters at an epoch boundary: the states it resumes right.

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

from lightning.fabric.utilities.data import _set_sampler_epoch
from lightning.pytorch.callbacks import Callback


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
