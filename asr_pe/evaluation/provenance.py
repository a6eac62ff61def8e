"""Which checkpoint a result came from, and whether the result is still that checkpoint's.

Every evaluation writes a checkpoint record (`checkpoint_record`) into each set's
``buckets.meta.json`` and into ``eval/done.json``: the file name, the training step stored in it
and the SHA-256 of its bytes. A result whose checkpoint file has since been replaced (a run resumed
and trained further overwrites ``last.ckpt`` and usually ``best.ckpt``) is stale. Whether a
result can stand is one question with one owner, `asr_pe.evaluation.reuse.stale_reason`, which
compares this record *and* the decoding settings (the recipes ask it through ``evaluate.py
reuse=true``; a checkpoint-only answer kept beam-search numbers as the default decoding's).

Only the file name and its bytes are compared, never its modification time: a copied or archived
run folder keeps its results valid.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from asr_pe.run_folder import BUCKETS_META, result_dir

CHUNK = 1 << 22  # 4 MiB: reading a multi-GB checkpoint in pieces keeps memory flat


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def checkpoint_step(path: str | Path, *, hint: str = "delete it or use another checkpoint") -> int | None:
    """The ``global_step`` a Lightning checkpoint stores (None for a bare state dict); a file that
    does not load is one ``CheckpointError`` naming it and ending with ``hint``.

    ``mmap=True``: the tensors stay on disk, so reading the step of a large checkpoint is cheap."""
    # here: the recipes' staleness question (`main`) runs without loading torch
    from asr_pe.inference.run_loading import read_checkpoint

    step = read_checkpoint(path, hint=hint, mmap=True).get("global_step")
    return None if step is None else int(step)


def checkpoint_record(path: str | Path, **kwargs: Any) -> dict[str, Any]:
    """``{"name", "global_step", "sha256"}`` of a checkpoint file: what a result was computed from
    (``kwargs``: `checkpoint_step`'s ``hint``)."""
    path = Path(path)
    return {"name": path.name, "global_step": checkpoint_step(path, **kwargs), "sha256": file_sha256(path)}


def weights_sha256(path: str | Path) -> str:
    """SHA-256 of a checkpoint's weights alone: each ``state_dict`` entry's name, dtype, shape and
    bytes, in name order. The file's bytes (`file_sha256`) also hold the callbacks' state, which
    names the run folder by absolute path, so the same weights trained in another folder are another
    file; this digest is the same for them (a fine-tune's ``init_from`` records both)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    state = state.get("state_dict", state)
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())   # (numel * itemsize,) raw bytes
    return h.hexdigest()


def read_meta(folder: str | Path) -> dict[str, Any] | None:
    """A result folder's ``buckets.meta.json``; None when it is missing, unreadable or no JSON object."""
    try:
        meta = json.loads((Path(folder) / BUCKETS_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def recorded_checkpoint(folder: str | Path) -> dict[str, Any] | None:
    """The checkpoint record of one result folder (``eval/<set>``), None when it has none."""
    record = (read_meta(folder) or {}).get("checkpoint")
    return record if isinstance(record, dict) and record.get("sha256") and record.get("name") else None


def evaluated_checkpoint(run_dir: str | Path, result_names: list[str]) -> dict[str, Any]:
    """The one checkpoint record shared by the results ``eval/<name>`` (what done.json records)."""
    records = {name: recorded_checkpoint(result_dir(run_dir, name)) for name in result_names}
    distinct = {json.dumps(r, sort_keys=True) for r in records.values()}
    assert len(distinct) == 1 and None not in records.values(), (
        f"the results of one evaluation name different checkpoints: {records}")
    return next(iter(records.values()))
