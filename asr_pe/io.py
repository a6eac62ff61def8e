"""Atomic file writes: a temporary file in the target folder, fsync, then ``os.replace``.

A job killed mid-write leaves the previous file (or none), never a truncated one. Files get
the usual permissions (0666 minus the umask), not mkstemp's private 0600, so manifests and
results stay readable to other users on a shared cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:   # closed (and fsynced) before the replace
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.<name>.<random>.tmp``: hidden, and what a run's start
    clears after a kill) that replaces ``path`` atomically when the block succeeds and is removed
    when it fails. For writers that need a file name (matplotlib's savefig, soundfile): give them
    the format explicitly, the temporary name does not end in the target's suffix.

        with atomic_path(out / "fig.png") as tmp:
            fig.savefig(tmp, format="png")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_object(text: str, path: str | os.PathLike, error: type[Exception] = ValueError,
                line_no: int | None = None) -> dict:
    """``text``, read from ``path`` (line ``line_no`` of it, else the whole file), as a JSON object.
    Text that is not JSON, or not a JSON object, raises ``error("<path>:<line>: ...")``: the one
    place that says so for the JSON files the project reads (run_info.json, JSONL records)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}:{line_no or e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise error(f"{path}:{line_no or 1}: expected a JSON object")
    return obj


def read_jsonl(path: str | os.PathLike, error: type[Exception] = ValueError) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of a JSON-lines file (result records,
    hypotheses); a line that is not a JSON object raises `json_object`'s ``error``."""
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if line.strip():
                yield line_no, json_object(line, path, error, line_no)


def unwritable_reason(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be written (created with its missing folders), or None if it can.

    Checked before long work whose result goes there, so a typo in an output path costs
    nothing: the nearest existing ancestor must be a writable folder, the path no folder."""
    path = Path(path)
    if path.is_dir():
        return "is a folder; name a file"
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"folder {parent} is not writable"
    return None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2, sort_keys: bool = False) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=indent, sort_keys=sort_keys) + "\n")
