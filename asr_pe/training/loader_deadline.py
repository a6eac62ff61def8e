"""A deadline on every batch a DataLoader with workers hands to training.

PyTorch's ``DataLoader(timeout=)`` bounds only the wait for a batch's *message*. The tensors travel
apart from it: under the default "file_descriptor" sharing strategy the training process, while it
unpickles the message, asks the worker for each tensor's file descriptor over a socket
(``multiprocessing.resource_sharer``), and that exchange has no timeout. A worker that stops after
it queued a batch (stuck in a system call or in a C extension that holds its GIL; stopped with
SIGSTOP in the tests) therefore left training waiting inside ``next()`` forever, deaf to SIGTERM:
``torch.utils.data`` never raised its "DataLoader timed out" there.

``DeadlineLoader`` arms a SIGALRM timer of the loader's own ``timeout`` around each ``next()`` in the
main thread, so the whole hand-over of a batch (message and tensors) has the deadline, and the error
is PyTorch's own ("DataLoader timed out after T seconds"), whichever of the two clocks runs out
first. ``end_loader_workers`` then kills the workers that did not end: multiprocessing joins every
child at exit, which would otherwise hang on the stuck one, and ``loader_timeout_error`` turns the
error into one that says what happened and what to try.
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import threading
from collections.abc import Iterator

import torch
from omegaconf import DictConfig

from asr_pe.errors import UserError

log = logging.getLogger(__name__)

DEFAULT_LOADER_TIMEOUT_S = 600.0  # data.loader_timeout_s when a config predates the key


class BatchDeadlineExceeded(RuntimeError):
    """Raised by the SIGALRM handler: a batch was not handed over within the loader's timeout."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise `BatchDeadlineExceeded` in the main thread if the block runs longer than ``seconds``.

    A blocking system call (a socket read) is interrupted by the signal and Python raises the
    handler's exception from it (PEP 475 retries it only when the handler returns). Outside the
    main thread (signals reach only it), without ``setitimer``, or while another timer of the
    process runs (e.g. pytest-timeout's; it is left alone) this does nothing: PyTorch's own timeout
    is then the only one.
    """
    if (seconds <= 0 or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer")
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        yield
        return

    def on_alarm(signum, frame):
        raise BatchDeadlineExceeded(f"DataLoader timed out after {seconds} seconds")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _DeadlineIterator:
    """The loader's own iterator, each ``next()`` under `deadline`."""

    def __init__(self, iterator: Iterator, seconds: float):
        self._iterator, self._seconds = iterator, seconds

    def __iter__(self):
        return self

    def __next__(self):
        with deadline(self._seconds):
            return next(self._iterator)

    def __len__(self) -> int:
        return len(self._iterator)

    def __getattr__(self, name: str):  # what else a caller reads of PyTorch's iterator
        if name == "_iterator":  # not set yet (copy, unpickling): no endless recursion
            raise AttributeError(name)
        return getattr(self._iterator, name)


class DeadlineLoader(torch.utils.data.DataLoader):
    """A DataLoader whose ``timeout`` (with workers) also bounds the transfer of a batch's tensors."""

    def __iter__(self):
        iterator = super().__iter__()
        if self.num_workers > 0 and self.timeout > 0:
            return _DeadlineIterator(iterator, float(self.timeout))
        return iterator


def end_loader_workers() -> None:
    """Kill the DataLoader workers (daemon children) still alive after a loader timeout.

    Called once the trainer has shut its loaders down (PyTorch then no longer watches their pids,
    so their end raises nothing).
    """
    stuck = [p for p in multiprocessing.active_children() if p.daemon]
    for p in stuck:
        log.warning("killing DataLoader worker pid %s, which did not end after the loader timed out", p.pid)
        p.kill()
    for p in stuck:
        p.join(timeout=10)


class LoaderTimeoutError(UserError, RuntimeError):
    """A DataLoader worker handed over no batch within ``data.loader_timeout_s``."""


def loader_timeout_error(error: BaseException, data_cfg: DictConfig) -> LoaderTimeoutError | None:
    """PyTorch's "DataLoader timed out" as an error that says what happened and what to try."""
    if "DataLoader timed out" not in str(error):
        return None
    return LoaderTimeoutError(
        f"{error}: a loader worker delivered no batch within data.loader_timeout_s="
        f"{data_cfg.get('loader_timeout_s', DEFAULT_LOADER_TIMEOUT_S)} (a worker that cannot write its shared "
        f"memory, e.g. a full /dev/shm, or one stuck reading audio); the run resumes from its last checkpoint "
        f"with resume=true. Try data.num_workers=0, more shared memory, or a larger data.loader_timeout_s")
