"""The run's checkpoints: two fixed names, the final weights always saved, the newest one found.

Lightning's `ModelCheckpoint` picks file names itself: with its version counter on (the default)
it writes ``last-v1.ckpt``, ``last-v2.ckpt``, ... whenever ``last.ckpt`` exists but is not the file
its restored state points at: the run folder was copied or moved (the state stores the absolute
folder), ``checkpoint.every_n_train_steps`` changed (part of the callback's state key, so the
state is not restored at all), or two processes resumed at once. It also saves ``last`` at the end
of training only when nothing was saved before, so a run of 40 steps with checkpoints every 7
ended with the step-35 weights on disk. And a copied folder's ``best.ckpt`` was replaced by the
first (worse) validation after a resume, because the best score is only restored when the
folder path is unchanged.

Here: ``checkpoints/last.ckpt`` (every ``checkpoint.every_n_train_steps`` steps and at the end of
training) and ``checkpoints/best.ckpt`` (lowest ``val/cer``); no version counter; state keys that
do not depend on the path or the interval; the best score restored wherever the folder now lives.
The metric logs are flushed before each checkpoint, so ``logs/metrics.csv`` always holds every
row the checkpoint has trained through (see `asr_pe.training.metrics_log`).

Written atomically inside the run folder (`RunFolderCheckpointIO`): Checkpoints written atomically inside the run folder.

Lightning's `TorchCheckpointIO` writes through an fsspec transaction whose temporary file lives in
``$TMPDIR``; committing it is a rename only when ``$TMPDIR`` is on the run folder's file system.
On a cluster it usually is not (node-local /tmp, a shared run folder), so the commit is a copy,
and a job killed during it (a time limit, preemption) leaves a truncated ``last.ckpt``: the one
file a requeued job resumes from. Here the temporary file is in the checkpoint's own folder, so
the final step is always an atomic ``os.replace``.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint

from asr_pe.io import atomic_write_bytes

from asr_pe.evaluation.provenance import checkpoint_step as stored_step
from asr_pe.run_folder import BEST, CHECKPOINT_SUFFIX, LAST, checkpoint_dir

from .lightning_private import make_resumable

log = logging.getLogger(__name__)

BEST_MONITOR = "val/cer"


class _RunCheckpoint(ModelCheckpoint):
    """Shared behaviour: flush the loggers before writing (the CSV logger otherwise writes every
    100 steps, and a kill would lose the rows between its last write and the checkpoint)."""

    def _save_checkpoint(self, trainer, filepath: str) -> None:
        for logger in trainer.loggers:
            logger.save()
        super()._save_checkpoint(trainer, filepath)


class LastCheckpoint(_RunCheckpoint):
    """``last.ckpt`` every ``every_n_train_steps`` steps and after the final step."""

    def __init__(self, dirpath: Path, every_n_train_steps: int):
        super().__init__(dirpath=dirpath, filename=LAST, save_last=True, save_top_k=0,
                         every_n_train_steps=every_n_train_steps, auto_insert_metric_name=False,
                         enable_version_counter=False)

    @property
    def state_key(self) -> str:
        return "asr_pe.LastCheckpoint"  # independent of the interval: a changed interval still resumes

    def on_train_end(self, trainer, pl_module) -> None:
        # Lightning saves here only when no checkpoint was saved at all during the fit; the final
        # weights must be on disk whatever the interval.
        if trainer.global_step > 0 and self._last_global_step_saved != trainer.global_step:
            # as it ended, the fit counts its last epoch as completed even when max_steps stopped it
            # midway: saved so, a run continued with more steps would skip that epoch's rest
            make_resumable(trainer)
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def state_dict(self) -> dict[str, Any]:
        return {}  # nothing to carry: the file name is fixed

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass


class BestCheckpoint(_RunCheckpoint):
    """``best.ckpt``: the lowest ``val/cer`` so far, also across resumes in a moved folder."""

    def __init__(self, dirpath: Path):
        super().__init__(dirpath=dirpath, filename=BEST, monitor=BEST_MONITOR, mode="min", save_top_k=1,
                         auto_insert_metric_name=False, enable_version_counter=False)

    @property
    def state_key(self) -> str:
        return "asr_pe.BestCheckpoint"

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        # checkpoints written before this callback existed keep the state under Lightning's key
        states = checkpoint.get("callbacks") or {}
        if self.state_key not in states:
            for key, state in list(states.items()):
                if key.startswith("ModelCheckpoint") and isinstance(state, dict) \
                        and state.get("monitor") == BEST_MONITOR and state.get("best_model_score") is not None:
                    states[self.state_key] = state
                    break

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # The saved paths name the folder the run was in then; the file is ours wherever it is now.
        here = str(Path(self.dirpath) / f"{BEST}{CHECKPOINT_SUFFIX}")
        score = state_dict.get("best_model_score")
        self.best_model_score = score
        self.best_model_path = here if score is not None else ""
        self.best_k_models = {here: score} if score is not None else {}
        self.kth_best_model_path = self.best_model_path
        self.kth_value = score if score is not None else self.kth_value
        self.current_score = state_dict.get("current_score")


def run_checkpoints(run_dir: Path, every_n_train_steps: int) -> list[ModelCheckpoint]:
    ckpt_dir = checkpoint_dir(run_dir)
    return [LastCheckpoint(ckpt_dir, every_n_train_steps), BestCheckpoint(ckpt_dir)]


def checkpoint_step(path: Path) -> int | None:
    """The ``global_step`` stored in a checkpoint; None when it cannot be read (truncated, foreign)."""
    try:
        step = stored_step(path)
        if step is None:
            raise KeyError("global_step")
        return step
    except Exception as e:  # a damaged file is skipped, never resumed from
        log.warning("checkpoint %s cannot be read (%s: %s); not resuming from it", path, type(e).__name__, e)
        return None


def resume_checkpoint(run_dir: Path) -> tuple[Path, int] | None:
    """The newest readable resume point of the run: ``last.ckpt``, or a ``last-v<k>.ckpt`` that an
    older version of the toolkit (Lightning's version counter) wrote, by stored step; ties go to
    ``last.ckpt``. None when the run has no checkpoint."""
    ckpt_dir = checkpoint_dir(run_dir)
    if not ckpt_dir.is_dir():
        return None
    candidates = sorted(ckpt_dir.glob(f"{LAST}*{CHECKPOINT_SUFFIX}"),
                        key=lambda p: (p.name != f"{LAST}{CHECKPOINT_SUFFIX}", p.name))
    best: tuple[Path, int] | None = None
    for path in candidates:
        step = checkpoint_step(path)
        if step is not None and (best is None or step > best[1]):
            best = (path, step)
    return best


def remove_partial_writes(run_dir: Path) -> list[Path]:
    """Delete the hidden temporary files (``.<name>.<random>.tmp``, `asr_pe.io`) that a process
    killed in the middle of an atomic write left anywhere in the run folder (a checkpoint's is as
    large as the model). Call only while holding the run's lock: another live process may be
    writing them."""
    run_dir = Path(run_dir)
    removed = []
    for tmp in run_dir.rglob(".*.tmp"):
        if tmp.is_file():
            tmp.unlink()
            removed.append(tmp)
    if removed:
        log.info("removed %d partial write(s) of an interrupted process: %s", len(removed),
                 ", ".join(str(p.relative_to(run_dir)) for p in removed))
    return removed


class RunFolderCheckpointIO(TorchCheckpointIO):
    """Checkpoints written atomically inside the run folder (the module docstring says why)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        atomic_write_bytes(path, buffer.getvalue())
