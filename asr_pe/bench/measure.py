"""Measuring one benchmark step: wall and CPU time, peak memory (CUDA allocator or CPU RSS).

On CPU the peak is that of a thread sampling the resident set; `fix_malloc_for_rss` makes glibc
return freed tensors to the system at once so that RSS tracks live tensors.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import resource
import sys
import threading
import time
from typing import Any, Callable

import torch

__all__ = ["PeakMemory", "current_rss", "fix_malloc_for_rss", "max_rss_bytes", "sync", "timed", "trim_heap"]


def _libc():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


_LIBC = _libc()


def fix_malloc_for_rss() -> bool:
    """Make glibc serve allocations ≥ 128 KiB by mmap and never raise that threshold, so a
    freed tensor leaves the resident set at once and RSS tracks live tensors. Slows large
    allocations a little, so it is switched on only for the memory pass (after timing)."""
    if _LIBC is None or not hasattr(_LIBC, "mallopt"):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    ok = _LIBC.mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1
    ok = _LIBC.mallopt(M_TRIM_THRESHOLD, 128 * 1024) == 1 and ok
    return ok


def trim_heap() -> None:
    gc.collect()
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


def current_rss() -> int | None:
    """Resident set size in bytes (Linux /proc), None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def max_rss_bytes() -> int:
    """Peak RSS of this process so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, float]:
    """Run ``fn()`` once -> (wall seconds, process CPU seconds), the device synchronised on both sides.

    CPU time counts all the process's threads: less sensitive than wall time to other processes
    taking the cores, which a shared machine has plenty of.
    """
    sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    sync(device)
    return time.perf_counter() - t0, time.process_time() - c0


class PeakMemory:
    """Peak extra memory of a block in MiB: CUDA allocator peak minus what was allocated on
    entry, or the peak of a thread sampling RSS every 0.5 ms minus RSS on entry (CPU)."""

    def __init__(self, device: torch.device, interval_s: float = 0.0005):
        self.device, self.interval_s = device, interval_s
        self.peak_mb = float("nan")

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return self
        trim_heap()
        self._base = current_rss()
        self._peak = self._base
        self._stop = threading.Event()
        if self._base is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            r = current_rss()
            if r is not None and r > self._peak:
                self._peak = r
            time.sleep(self.interval_s)

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_mb = (torch.cuda.max_memory_allocated(self.device) - self._base) / 2**20
            return False
        if self._base is not None:
            self._stop.set()
            self._thread.join()
            r = current_rss()
            self.peak_mb = (max(self._peak, r or 0) - self._base) / 2**20
        return False
