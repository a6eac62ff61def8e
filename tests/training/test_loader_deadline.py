"""`asr_pe.training.loader_deadline`: the deadline interrupts a blocking read, and is gone after."""
import signal
import socket
import threading
import time

import pytest
import torch

from asr_pe.training.loader_deadline import BatchDeadlineExceeded, DeadlineLoader, _DeadlineIterator, deadline


def test_the_deadline_interrupts_a_blocking_socket_read_and_restores_the_previous_handler():
    """What a training process waits on when a stuck worker holds a batch's file descriptors."""
    before = signal.getsignal(signal.SIGALRM)
    a, b = socket.socketpair()
    try:
        started = time.monotonic()
        with pytest.raises(BatchDeadlineExceeded, match=r"DataLoader timed out after 0.3 seconds"):
            with deadline(0.3):
                a.recv(1)  # nobody writes
        assert 0.25 < time.monotonic() - started < 5
    finally:
        a.close(), b.close()
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_block_that_ends_in_time_leaves_no_timer_behind():
    with deadline(5.0):
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    time.sleep(0.05)  # nothing fires later


def test_a_timer_of_someone_else_is_left_alone():
    """E.g. pytest-timeout's signal method: its alarm keeps its time and its handler."""
    fired = []
    before = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.4)
        with deadline(0.05):
            time.sleep(0.2)  # no BatchDeadlineExceeded
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] < 0.4
        time.sleep(0.5)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_outside_the_main_thread_the_deadline_does_nothing():
    """Signals reach only the main thread; there PyTorch's own timeout is the only one."""
    seen = []

    def body():
        with deadline(0.05):
            time.sleep(0.2)
        seen.append(signal.getitimer(signal.ITIMER_REAL))

    t = threading.Thread(target=body)
    t.start(), t.join()
    assert seen == [(0.0, 0.0)]


def test_only_a_loader_with_workers_and_a_timeout_gets_the_deadline():
    data = list(range(6))
    assert not isinstance(iter(DeadlineLoader(data, batch_size=2)), _DeadlineIterator)
    assert not isinstance(iter(DeadlineLoader(data, batch_size=2, num_workers=1)), _DeadlineIterator)
    loader = DeadlineLoader(data, batch_size=2, num_workers=1, timeout=30)
    it = iter(loader)
    assert isinstance(it, _DeadlineIterator) and len(it) == 3
    assert [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5]]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert torch.equal(next(iter(loader)), torch.tensor([0, 1]))
