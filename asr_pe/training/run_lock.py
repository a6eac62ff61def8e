"""One process per run folder: an exclusive ``flock`` on ``<run>/.lock`` for the process' life.

Two ``train.py`` on one folder (two resumes of one run, a run started twice in one second, a
sweep launched twice) would write the same checkpoints, logs and evaluation. The lock is taken
by the process that owns the run: global rank 0 (under DDP all ranks of one run share the
folder; the others never lock). ``flock`` is released by the kernel when the process ends, also
on ``kill -9``, so a crashed run never leaves a stale lock; the pid and host written into the file
only serve the error message. Lightning's DDP ranks and DataLoader workers do not hold it: Python
opens files close-on-exec, and a forked worker shares the parent's lock rather than taking one.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from asr_pe.run_folder import LOCK

_held: dict[Path, int] = {}  # run folder -> descriptor, for this process' life


class RunInUseError(RuntimeError):
    """Another live process holds the run folder's lock."""


def hold_run_lock(run_dir: Path) -> None:
    """Take the run folder's lock for the rest of this process (again in the same process: no-op)."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
        os.close(fd)
        raise RunInUseError(
            f"{run_dir} is in use by another train.py ({holder}); wait for it to finish, or give this "
            f"run another folder (run_dir=...)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
              .encode(), 0)
    _held[run_dir] = fd
