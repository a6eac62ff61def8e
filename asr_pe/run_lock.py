"""One writer per run folder: an exclusive lock on ``<run>/.lock`` while a process writes the run.

Two processes writing one folder lose data or mix numbers: two ``train.py`` (two resumes of one
run, a sweep launched twice) write the same checkpoints and logs; an ``evaluate.py`` started
during training and ending after the evaluation that follows it replaced that evaluation with an
older checkpoint's. So ``train.py`` (global rank 0; under DDP the ranks share the folder and the
others never lock) holds the lock for its life (`hold_run_lock`), and every evaluation that writes
``eval/`` holds it while it writes (`run_lock`, taken by `asr_pe.evaluation.pipeline.evaluate_run`;
a no-op inside the ``train.py`` that already holds it). A second writer stops at once with
`RunInUseError` naming the holder.

The lock is a POSIX record lock (``fcntl.lockf``), not ``flock``: a ``flock`` belongs to the open
file, which forked DataLoader workers share, so a ``kill -9``'d run's orphaned workers kept the
folder locked for seconds and an immediate resume was refused. A record lock belongs to the
process: children never hold it, and the kernel drops it when the process ends, ``kill -9``
included, so there is never a stale lock to remove. The file's text (pid, program, host, time)
only serves the error message. Record locks have one catch, which `_held` guards against: closing
*any* descriptor of the file in the holding process drops its lock, so this process never opens
the file a second time while it holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from asr_pe.errors import UserError
from asr_pe.run_folder import LOCK

_held: dict[Path, int] = {}  # run folder -> descriptor of its lock, while this process holds it


class RunInUseError(UserError, RuntimeError):
    """Another live process holds the run folder's lock."""


def _acquire(run_dir: Path, program: str) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # EACCES or EAGAIN: held by another process
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
        os.close(fd)
        raise RunInUseError(
            f"{run_dir} is in use by another process ({holder}); wait for it to finish, or give this "
            f"run another folder (run_dir=...)") from None
    os.ftruncate(fd, 0)
    program = program or (Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python")
    os.pwrite(fd, f"pid {os.getpid()} ({program}) on {socket.gethostname()} since "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
    _held[run_dir] = fd
    return fd


def hold_run_lock(run_dir: Path, program: str = "") -> None:
    """Take the run folder's lock for the rest of this process (again in the same process: no-op)."""
    run_dir = Path(run_dir).resolve()
    if run_dir not in _held:
        _acquire(run_dir, program)


@contextlib.contextmanager
def run_lock(run_dir: Path, program: str = "") -> Iterator[None]:
    """Hold the run folder's lock for the block; a no-op when this process already holds it."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        yield
        return
    fd = _acquire(run_dir, program)
    try:
        yield
    finally:
        del _held[run_dir]
        os.close(fd)  # releases the record lock


def release_run_lock(run_dir: Path) -> bool:
    """Give the lock back before the process ends (a refused start); whether this process held it."""
    fd = _held.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        os.close(fd)
    return fd is not None
