"""The GPU check (scripts/gpu_check.py -> asr_pe/bench/gpu_check.py) in its dry mode on CPU: every
step runs in a child process, the summary holds a row per PE and length, and a step that overruns
its limit is killed without taking the others with it. No timing is asserted."""

import dataclasses
import json
import sys
import time

import pytest

from asr_pe.bench import gpu_check
from asr_pe.bench.cases import ALL_PES, REFERENCE
from asr_pe.bench.grad_check import DRY_PROBE_LENGTHS, DRY_T

DRY_LENGTHS = [16, 32, 64]  # gpu_check.step_commands' dry bench lengths


def _check_grad(step):
    rows = step["rows"]
    probes = [r for r in rows if r["check"] == "probe"]
    assert {(r["variant"], r["T"]) for r in probes} == {
        (v, L) for v in ("torch", "cudnn", "project") for L in DRY_PROBE_LENGTHS}
    for r in probes:  # on CPU: finite, on the CPU's own kernel; cuDNN cannot be forced without CUDA
        assert r["status"] == ("n/a (no CUDA)" if r["variant"] == "cudnn" else "finite"), r
    models = [r for r in rows if r["check"] == "model"]
    assert [r["pe"] for r in models] == ALL_PES and step["pes"] == sorted(ALL_PES)
    for r in models:
        assert r["T"] == DRY_T and r["status"] == "finite" and r["nonfinite_grads"] == 0, r
        assert r["params_without_grad"] == 0 and r["lengths"] == f"{DRY_T * 3 // 4}-{DRY_T}"
    # the backend is recorded: the PEs that reach SDPA on CPU ran its CPU kernel, forward and backward
    assert {r["forward_backends"] for r in models if r["pe"] in ("none", "rope", "alibi")} == {"flash_cpu 2", "flash_cpu 4"}


def _check_bench(step, path):
    rows = step["rows"]
    names = ALL_PES + ([REFERENCE] if path == "fused" else [])
    assert {(r["pe"], r["T"]) for r in rows} == {(n, T) for n in names for T in DRY_LENGTHS}
    for r in rows:
        assert r["status"] == "ok" and r["precision"] == "bf16" and r["ms_per_step"] > 0 and r["peak_mem_mb"] >= 0
        if r["pe"] == "none":
            assert r["ratio_to_none"] == 1.0


def _check_summary(out, steps):
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["steps"]) == steps and summary["dry"] is True
    for name in steps:
        assert summary["steps"][name]["status"] == "ok", (name, summary["steps"][name]["status"],
                                                          (out / "logs" / f"{name}.log").read_text()[-2000:])
    assert summary["environment"]["torch"] and summary["environment"]["gpu"] is None
    md = (out / "summary.md").read_text()
    assert "dry run on CPU" in md
    assert [line.split(" | ")[0][2:] for line in md.splitlines() if " | ok | " in line and " | (" in line] == steps
    return summary, md


@pytest.mark.slow  # ~70 s on 2 idle cores (100 s busy): .ci/run runs it after make test, to keep make test under 12 min
def test_dry_check_runs_the_gradient_benchmark_and_long_steps(tmp_path):
    steps = ["grad", "bench_fused", "long"]
    gpu_check.run_gpu_check(tmp_path, dry=True, steps=steps, argv=["--dry"])
    summary, md = _check_summary(tmp_path, steps)
    _check_grad(summary["steps"]["grad"])
    _check_bench(summary["steps"]["bench_fused"], "fused")
    long_rows = summary["steps"]["long"]["rows"]
    assert [(r["pe"], r["status"]) for r in long_rows] == [("none", "ok"), ("relative", "ok")]
    assert all(r["frames"] > 0 and r["peak_rss_mb"] > 0 for r in long_rows)
    # the markdown holds a table row per PE of each step (the grad step twice: probe and model tables)
    for pe in ALL_PES:
        assert md.count(f"| {pe} |") == 2 + (pe in ("none", "relative")), pe
    assert "## (b)" in md and "## (c)" in md and "## (d)" in md and "## (a)" not in md


@pytest.mark.slow
def test_full_dry_check_with_the_reference_path_and_both_recipes_smoke_runs(tmp_path):
    steps = [s.name for s in gpu_check.STEPS]
    gpu_check.run_gpu_check(tmp_path, dry=True)
    summary, md = _check_summary(tmp_path, steps)
    _check_grad(summary["steps"]["grad"])
    _check_bench(summary["steps"]["bench_fused"], "fused")
    _check_bench(summary["steps"]["bench_flex"], "flex")
    _check_bench(summary["steps"]["bench_reference"], "reference")
    smoke = summary["steps"]["smoke"]["rows"]
    assert {(r["recipe"], r["pe"], r["test_set"]) for r in smoke} == {
        ("librispeech", "none", "test-clean"), ("librispeech", "none", "test-clean_long"),
        ("tedlium3", "none", "test"), ("tedlium3", "none", "test_long"), ("tedlium3", "none", "test_talks")}
    for r in smoke:  # 3 steps learn nothing: the CER only has to be there
        assert r["exit"] == 0 and r["cer"] >= 0 and r["utterances"] > 0 and r["loss_first"] > 0, r
    assert "## (a)" in md and "T=64 reference" in md and "T=64 flex" in md


def _running(pid: int) -> bool:
    """A live process (a killed one whose parent is gone may linger as a zombie until reaped)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


def test_a_step_over_its_limit_is_killed_with_its_children_and_the_next_step_runs(tmp_path, monkeypatch):
    pid_file = tmp_path / "grandchild.pid"
    sleeper = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
               f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    cmds = {"grad": [[sys.executable, "-c", sleeper]], "long": [[sys.executable, "-c", "print('done')"]],
            "bench_fused": [[sys.executable, "-c", "import sys; sys.exit(4)"]]}
    monkeypatch.setattr(gpu_check, "step_commands", lambda step, out, dry: cmds[step])
    monkeypatch.setattr(gpu_check, "STEPS", tuple(dataclasses.replace(s, dry_limit_s=3) for s in gpu_check.STEPS))
    t0 = time.monotonic()
    summary = gpu_check.run_gpu_check(tmp_path, dry=True, steps=["grad", "bench_fused", "long"])
    assert time.monotonic() - t0 < 30
    status = {k: v["status"] for k, v in summary["steps"].items()}
    assert status == {"grad": "timeout after 3 s", "bench_fused": "failed (exit 4)", "long": "ok"}
    assert not _running(int(pid_file.read_text()))  # the step's grandchild went with it
    assert "done" in (tmp_path / "logs" / "long.log").read_text()
    # a step that the budget no longer covers is skipped, and says so
    summary = gpu_check.run_gpu_check(tmp_path / "b", dry=True, steps=["grad", "long"], budget_s=7)
    assert summary["steps"]["grad"]["status"].startswith("timeout")
    assert summary["steps"]["long"]["status"].startswith("skipped")
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["steps"]["long"]["rows"] == []
