"""Which checkpoint a result came from, and whether the result is still that checkpoint's.

Every evaluation writes a checkpoint record (`checkpoint_record`) into each set's
``buckets.meta.json`` and into ``eval/done.json``: the file name, the training step stored in it
and the SHA-256 of its bytes. A result whose checkpoint file has since been replaced (a run resumed
and trained further overwrites ``last.ckpt`` and usually ``best.ckpt``) is stale: `stale_sets`
names the sets to evaluate again. The recipes' evaluation stage calls it as

    python -m asr_pe.evaluation.provenance <run dir> <test set>...

which prints the sets (of those given) whose results are missing or stale, one a line, and exits
0; exit 2 with one line for a run folder that does not exist.

Only the file name and its bytes are compared, never its modification time: a copied or archived
run folder keeps its results valid.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from asr_pe.run_folder import BUCKETS_CSV, BUCKETS_META, PER_UTT, checkpoint_dir, result_dir

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


def recorded_checkpoint(folder: str | Path) -> dict[str, Any] | None:
    """The checkpoint record of one result folder (``eval/<set>``), None when it has none."""
    try:
        record = json.loads((Path(folder) / BUCKETS_META).read_text())["checkpoint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) and record.get("sha256") and record.get("name") else None


def evaluated_checkpoint(run_dir: str | Path, result_names: list[str]) -> dict[str, Any]:
    """The one checkpoint record shared by the results ``eval/<name>`` (what done.json records)."""
    records = {name: recorded_checkpoint(result_dir(run_dir, name)) for name in result_names}
    distinct = {json.dumps(r, sort_keys=True) for r in records.values()}
    assert len(distinct) == 1 and None not in records.values(), (
        f"the results of one evaluation name different checkpoints: {records}")
    return next(iter(records.values()))


def stale_sets(run_dir: str | Path, names: list[str]) -> list[str]:
    """Those of ``names`` whose ``eval/<name>`` lacks its files, lacks a checkpoint record (written
    before records existed: its checkpoint is unknown), or records a checkpoint whose file now holds
    other bytes or is gone. Each checkpoint file is hashed once per call."""
    run_dir = Path(run_dir)
    hashes: dict[str, str | None] = {}
    out = []
    for name in names:
        result = result_dir(run_dir, name)
        record = recorded_checkpoint(result)
        if record is None or not all((result / f).exists() for f in (PER_UTT, BUCKETS_CSV)):
            out.append(name)
            continue
        ckpt = checkpoint_dir(run_dir) / record["name"]
        if record["name"] not in hashes:
            hashes[record["name"]] = file_sha256(ckpt) if ckpt.is_file() else None
        if hashes[record["name"]] != record["sha256"]:
            out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m asr_pe.evaluation.provenance",
        description="Print the test sets whose results in RUN_DIR/eval are missing or were computed from a "
                    "checkpoint that has changed since, one a line.")
    parser.add_argument("run_dir", type=Path, help="the run folder")
    parser.add_argument("sets", nargs="*", help="test set names (eval/<name>) to check")
    args = parser.parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"error: {args.run_dir}: no such run folder (train it first)", file=sys.stderr)
        return 2
    for name in stale_sets(args.run_dir, args.sets):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
