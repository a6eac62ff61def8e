"""asr_pe.bench.measure: the timing and memory helpers return what they promise (no timing
thresholds: only signs, and a large allocation showing up in the peak)."""

import torch

from asr_pe.bench.measure import PeakMemory, current_rss, max_rss_bytes, timed, trim_heap


def test_rss_helpers_are_positive():
    rss = current_rss()
    assert rss is not None and rss > 0
    assert max_rss_bytes() > 0
    assert max_rss_bytes() >= rss * 0.5  # the peak so far is of the same order (KiB were scaled to bytes)
    trim_heap()


def test_timed_runs_the_step_once_and_returns_positive_times():
    calls = []
    model = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64)

    def step():
        calls.append(1)
        model(x).square().mean().backward()

    wall_s, cpu_s = timed(step, torch.device("cpu"))
    assert calls == [1]
    assert wall_s > 0 and cpu_s >= 0


def test_peak_memory_sees_a_large_cpu_allocation():
    with PeakMemory(torch.device("cpu")) as pm:
        x = torch.ones(16 * 2**20)  # 64 MiB, touched, alive until the block ends
    assert x.sum().item() == 16 * 2**20
    assert pm.peak_mb > 32


def test_peak_memory_of_an_empty_block_is_finite():
    with PeakMemory(torch.device("cpu")) as pm:
        pass
    assert pm.peak_mb == pm.peak_mb  # not NaN: measured
