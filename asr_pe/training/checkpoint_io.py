"""Checkpoints written atomically inside the run folder.

Lightning's `TorchCheckpointIO` writes through an fsspec transaction whose temporary file lives in
``$TMPDIR``; committing it is a rename only when ``$TMPDIR`` is on the run folder's file system.
On a cluster it usually is not (node-local /tmp, a shared run folder), so the commit is a copy,
and a job killed during it (a time limit, preemption) leaves a truncated ``last.ckpt``: the one
file a requeued job resumes from. Here the temporary file is in the checkpoint's own folder, so
the final step is always an atomic ``os.replace``.
"""

from __future__ import annotations

import io
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from asr_pe.io import atomic_write_bytes


class RunFolderCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        atomic_write_bytes(path, buffer.getvalue())
