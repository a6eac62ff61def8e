"""The private Lightning names the toolkit relies on, listed and checked in one place.

Lightning gives no public way to do a few things the run's guarantees need: resume at an epoch
boundary with the batch order an uninterrupted run would have (`asr_pe.training.epoch_boundaries`
adjusts the fit loop's progress counters), save ``last.ckpt`` after the final step whatever the
interval (`asr_pe.training.checkpoints`), and list the precision flags it accepts
(`asr_pe.training.config_checks`). A Lightning release may rename or change any of them without
notice, and a changed counter would not fail: it would silently train another batch order.
So ``pyproject.toml`` pins the Lightning minor versions the tests ran on (`TESTED`), and
`check_lightning` (called first by ``train()``) refuses another one with one line, unless
``ASR_PE_UNTESTED_LIGHTNING=1`` says the user takes that risk; `missing_private_names` is what
``tests/training/test_lightning_private.py`` checks against the installed Lightning.
"""

from __future__ import annotations

import os

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
