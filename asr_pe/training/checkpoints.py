"""The run's checkpoint files: the newest resume point found by its stored step, a killed
process' partial writes removed, and checkpoints written atomically inside the run folder. Which
checkpoints are saved when (``last.ckpt``, ``best.ckpt``) is `asr_pe.training.callbacks`.

Written atomically inside the run folder (`RunFolderCheckpointIO`): Lightning's `TorchCheckpointIO`
writes through an fsspec transaction whose temporary file lives in ``$TMPDIR``; committing it is a
rename only when ``$TMPDIR`` is on the run folder's file system. On a cluster it usually is not
(node-local /tmp, a shared run folder), so the commit is a copy, and a job killed during it (a time
limit, preemption) leaves a truncated ``last.ckpt``: the one file a requeued job resumes from. Here
the temporary file is in the checkpoint's own folder, so the final step is always an atomic
``os.replace``.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from asr_pe.evaluation.provenance import checkpoint_step as stored_step
from asr_pe.io import atomic_write_bytes
from asr_pe.run_folder import CHECKPOINT_SUFFIX, LAST, checkpoint_dir

log = logging.getLogger(__name__)

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
