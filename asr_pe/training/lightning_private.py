"""The Lightning names outside its documented API that the toolkit relies on, listed and checked in one place.

Training draws its batches as a function of the step (`asr_pe.data.sampler.StepBatches`), so
neither the batch order nor a resume depends on Lightning's loop counters: Lightning sees one
endless epoch, and `count_in_steps` sets the step count and the validation interval that an epoch
count in the config means, once the data says how many batches an epoch has (the trainer is built
before the data, to know its rank). Those are attributes of the trainer and its fit loop without a
setter in the public API. A checkpoint saved outside a training batch (a SIGTERM stop, the end of
the fit) is saved in the state Lightning itself saves at a batch's end (`as_saved_at_batch_end`):
two counters of the epoch loop. A SIGTERM stops every rank at the same step
(`asr_pe.training.callbacks.SigtermStop`): Lightning's handler calls the toolkit's notifier instead
of its own (`take_over_sigterm`), and the stop the ranks agreed on is set as Lightning's flag
(`set_sigterm_stop`), which its loops read. The list of precision flags Lightning accepts
(`asr_pe.training.config_checks`) comes from a private function.

A Lightning release may rename or change any of them without notice, so ``pyproject.toml`` pins the
Lightning minor versions the tests ran on (`TESTED`), and `check_lightning` (called first by
``train()``) refuses another one with one line, unless ``ASR_PE_UNTESTED_LIGHTNING=1`` says the
user takes that risk; `missing_private_names` is what ``tests/training/test_lightning_private.py``
checks against the installed Lightning.
"""

from __future__ import annotations

import os

from asr_pe.errors import UserError

from .schedules import StepSchedule

TESTED = ("2.6",)  # Lightning major.minor versions the test suite ran on; pyproject.toml pins the same

# owner (module:attribute path) -> the names read or set there outside Lightning's documented API
PRIVATE = {
    "lightning.pytorch.loops.fit_loop:_FitLoop": ("max_epochs", "epoch_loop"),
    "lightning.pytorch.loops.training_epoch_loop:_TrainingEpochLoop": ("max_steps", "batch_progress",
                                                                       "_batches_that_stepped", "_should_accumulate"),
    "lightning.pytorch:Trainer": ("val_check_interval", "check_val_every_n_epoch", "_signal_connector"),
    "lightning.pytorch.trainer.connectors.signal_connector:_SignalConnector": ("received_sigterm",
                                                                              "_sigterm_notifier_fn"),
    "lightning.fabric.connector:_convert_precision_to_unified_args": (),
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
    major, minor = TESTED[-1].split(".")  # the pin's upper end: the next minor version
    raise UntestedLightningError(
        f"lightning {version} is not a version asr_pe's resume and batch-order guarantees were tested with "
        f"({', '.join(t + '.x' for t in TESTED)}; asr_pe/training/lightning_private.py lists the private names "
        f"they rely on): install one (pip install 'lightning>={TESTED[0]},<{major}.{int(minor) + 1}') or set "
        f"ASR_PE_UNTESTED_LIGHTNING=1 to go on at your own risk")


def missing_private_names() -> list[str]:
    """The names of `PRIVATE` the installed Lightning lacks ("module:owner.name")."""
    import importlib
    import inspect

    missing = []
    for owner, names in PRIVATE.items():
        module, _, attr = owner.partition(":")
        obj = getattr(importlib.import_module(module), attr, None)
        if obj is None:
            missing.append(owner)
            continue
        try:  # instance attributes are set (or declared) in __init__: look for them in the class' module
            source = inspect.getsource(inspect.getmodule(obj))
        except (OSError, TypeError):
            source = ""
        missing += [f"{owner}.{name}" for name in names
                    if not hasattr(obj, name) and f"self.{name} =" not in source and f"self.{name}:" not in source]
    return missing


def precision_flag_error(value) -> str | None:
    """None when Lightning takes ``value`` as ``trainer.precision``, else the values it allows."""
    from lightning.fabric.connector import _convert_precision_to_unified_args

    try:
        _convert_precision_to_unified_args(value)
    except ValueError as e:
        return str(e).split("Allowed precision values:")[-1].strip()
    return None


def count_in_steps(trainer, schedule: StepSchedule) -> None:
    """The trainer ends at ``schedule.max_steps`` and validates every ``schedule.val_every`` batches of
    the whole run, with no epoch limit of its own: its one epoch is the run (the training loader
    has no end), and a resumed fit that Lightning starts as a new epoch goes on with the same
    counts. A time-based interval (``check_val_every_n_epoch: null``) stays as the trainer parsed it."""
    trainer.fit_loop.max_epochs = -1
    trainer.fit_loop.epoch_loop.max_steps = schedule.max_steps
    if isinstance(schedule.val_every, int):
        trainer.check_val_every_n_epoch = None
        trainer.val_check_interval = schedule.val_every


def as_saved_at_batch_end(trainer) -> None:
    """Before a checkpoint is saved after a training batch has ended (a SIGTERM stop, raised after the
    batch and any validation it triggered; the end of the fit): put the epoch loop back in the state Lightning saves from ``on_train_batch_end`` (that
    batch not yet counted as completed, the logging step not yet advanced), the state its own
    step checkpoints resume from. Saved as it stood, a stop after a batch that validated resumed
    as "saved at the validation's end" and advanced the logging step once more: every later row of
    ``logs/metrics.csv`` one step late. A no-op before the fit's first batch."""
    loop = trainer.fit_loop.epoch_loop
    batches = loop.batch_progress
    if not batches.total.completed == batches.total.processed > 0:
        return  # no batch has ended, or one is in progress (saved as Lightning's own checkpoints are)
    batches.total.completed -= 1
    if batches.current.completed > 0:
        batches.current.completed -= 1
    if not loop._should_accumulate():  # that batch stepped: Lightning adds the step back when it resumes
        loop._batches_that_stepped -= 1


def take_over_sigterm(trainer, note) -> None:
    """Lightning's SIGTERM handler calls ``note(signum, frame)`` in place of its own notifier, which
    sets a rank-local flag and broadcasts from inside the signal handler (`SigtermStop` says why that
    hangs DDP). Lightning still installs the handler when the fit starts, with the handlers it
    chains (SLURM's requeue bypass, a handler the process had before), and restores the previous
    ones when the fit ends. Call before the fit starts (a callback's ``setup``)."""
    trainer._signal_connector._sigterm_notifier_fn = note


def set_sigterm_stop(trainer, stop: bool) -> None:
    """Set (or hold back) the flag Lightning's loops stop on: set, the training loop raises its
    ``SIGTERMException`` after the current batch and its validation, and the evaluation loop after
    its current batch. Every rank must set the same value at the same point."""
    trainer._signal_connector.received_sigterm = bool(stop)
