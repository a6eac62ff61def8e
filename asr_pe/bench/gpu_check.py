"""The GPU check in one call (issue 47): what a lent GPU machine must measure, each step in a child
process under its own time limit, everything under one folder, the summary rewritten after every step.

    python scripts/gpu_check.py --out gpu_check            # on a CUDA machine: within 8 minutes
    python scripts/gpu_check.py --out /tmp/gc --dry        # the same steps, tiny, on CPU (also without CUDA)

Steps, in the order they run (cheap and most telling first, so a call cut short keeps them):

* ``grad``: bf16 gradients finite at T % 128 == 64 with padding, every PE, and the SDPA backend
  that ran (`asr_pe.bench.grad_check`; the cuDNN NaN of pytorch/pytorch#196678);
* ``bench_fused`` / ``bench_flex`` / ``bench_reference``: every PE's training step (bf16) at
  T = 250 / 1000 / 4000, time and peak memory, ratios to ``none`` of the same run, with the model's
  fused attention paths, with FlexAttention for every bias a PE offers in compact form (what sets
  ``BlockBias.flex_min_keys_cuda``), and with every attention written out (`asr_pe.bench.runner`,
  ``--attention``);
* ``long``: one 60-minute recording decoded in one pass per PE, peak GPU memory (bench long mode);
* ``smoke``: both corpus recipes' smoke runs with ``trainer=gpu`` (bf16), side by side, and their
  test CER (`asr_pe.bench.recipe_smoke`).

A step that overruns its limit is killed with its whole process group and the next one starts;
the steps' limits add up to the 8-minute budget, and no step runs past the budget.
``summary.md`` / ``summary.json`` (`asr_pe.bench.gpu_check_report`) are rewritten after every
step from the files the steps wrote, so a machine taken back mid-way leaves what ran.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["STEPS", "Step", "step_commands", "run_child", "run_gpu_check"]

REPO = Path(__file__).resolve().parents[2]
BENCH = str(REPO / "scripts" / "bench_attention.py")
BUDGET_S = 480.0  # the 8 minutes
MIN_STEP_S = 5.0  # less of the budget left than this: the remaining steps are skipped


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    limit_s: float      # on a GPU
    dry_limit_s: float  # the CPU run (tiny sizes, but a loaded 2-core machine)


# GPU limits (seconds; they add up to the 480 s budget), from two runs of the whole check: an H100 on
# 2026-11-27 (grad 15, fused 40, reference 30, smoke 130; long ran 10 of its 11 PEs in 110 s) and an
# H200 on 2026-11-28 (grad 17, fused just over its 70 s with the torchaudio row, flex 63 with its
# kernels compiled once per PE, reference 22, long 100, smoke 111)
STEPS = (
    Step("grad", "(d) bf16 gradients at T % 128 == 64 with padding, SDPA backend", 25, 180),
    Step("bench_fused", "(b) training step per PE, fused attention paths", 90, 240),
    Step("bench_flex", "(b) training step per PE, FlexAttention for the bias PEs", 80, 240),
    Step("bench_reference", "(b) training step per PE, reference attention path", 35, 240),
    Step("long", "(c) one 60-minute recording, full context, one pass per PE", 115, 180),
    Step("smoke", "(a) the recipes' smoke runs, trainer=gpu (bf16)", 135, 400),
)
# Long mode: the PEs whose memory matters most first (a step cut short keeps them)
LONG_PES = ["none", "rope", "relative", "alibi", "t5", "shaw", "rem", "cape", "sinusoidal", "learned", "conv"]
TINY = ["--layers", "2", "--d-model", "32", "--heads", "2", "--ffn", "64"]  # the dry run's model


def step_commands(step: str, out: Path, *, dry: bool) -> list[list[str]]:
    """The child processes of a step (run side by side) on a GPU, or tiny on CPU with ``dry``."""
    py = sys.executable
    dev = "cpu" if dry else "cuda"
    if step == "grad":
        return [[py, "-m", "asr_pe.bench.grad_check", "--out", str(out / "grad"), "--device", dev]
                + (["--dry"] if dry else [])]
    if step in ("bench_fused", "bench_flex", "bench_reference"):
        path = step.removeprefix("bench_")
        cmd = [py, BENCH, "--device", dev, "--precision", "bf16", "--attention", path, "--out", str(out / step)]
        if dry:
            cmd += TINY + ["--batch", "2", "--lengths", "16", "32", "64", "--reps", "1", "--warmup", "0",
                           "--mem-reps", "1", "--threads", "1"]
        else:  # the written-out path stores (B, H, T, T) tensors: fewer repetitions fit its time limit
            reps, warmup = ("3", "1") if path == "reference" else ("5", "2")
            cmd += ["--lengths", "250", "1000", "4000", "--reps", reps, "--warmup", warmup, "--mem-reps", "1",
                    "--threads", "4"]
        return [cmd + ([] if path == "fused" else ["--no-reference"])]  # torchaudio's row once
    if step == "long":
        cmd = [py, BENCH, "--mode", "long", "--device", dev, "--infer", "full", "--out", str(out / "long")]
        if dry:
            return [cmd + TINY + ["--minutes", "0.05", "--pes", "none", "relative", "--threads", "1", "--timeout", "60"]]
        return [cmd + ["--minutes", "60", "--pes", *LONG_PES, "--threads", "4", "--timeout", "30"]]
    if step == "smoke":
        return [[py, "-m", "asr_pe.bench.recipe_smoke", "--recipe", recipe, "--work", str(out / "smoke" / recipe)]
                + (["--dry"] if dry else ["--gpu"]) for recipe in ("librispeech", "tedlium3")]
    raise ValueError(f"unknown step {step!r}")


def _child_env() -> dict:
    """Children import asr_pe from this checkout (it need not be installed: a lent machine)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), "PYTHONUNBUFFERED": "1"}


def run_child(cmds: list[list[str]], limit_s: float, logs: list[Path]) -> dict:
    """Run ``cmds`` side by side, each in a process group of its own (a bench spawns children,
    run.sh a whole pipeline), killing every group still running at ``limit_s`` ->
    {"status": ok | failed (exit codes) | timeout, "seconds"}."""
    t0 = time.monotonic()
    procs = []
    for cmd, log in zip(cmds, logs):
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=_child_env(),
                                          start_new_session=True))
    timed_out = False
    for p in procs:
        try:
            p.wait(timeout=max(0.0, limit_s - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            timed_out = True
    for p in procs:
        if p.poll() is None:
            _kill_group(p)
    codes = [p.returncode for p in procs]
    status = (f"timeout after {limit_s:.0f} s" if timed_out else
              "ok" if all(c == 0 for c in codes) else f"failed (exit {', '.join(map(str, codes))})")
    return {"status": status, "seconds": round(time.monotonic() - t0, 1)}


def _kill_group(p: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_gpu_check(out: str | Path, *, dry: bool | None = None, steps: list[str] | None = None,
                  budget_s: float | None = None, argv: list[str] | None = None) -> dict:
    """Run the steps (all, or ``steps``) into ``out``; ``dry`` None: dry exactly when there is no
    CUDA device; ``budget_s``: no step runs past it (default: 8 minutes on a GPU, none dry).
    Returns the summary (also in ``out``/summary.json and .md)."""
    from .gpu_check_report import write_summary

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if dry is None:
        dry = not torch.cuda.is_available()
    chosen = [s for s in STEPS if steps is None or s.name in steps]
    state = {"dry": dry, "argv": list(argv or []), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
             "steps": {s.name: {"status": "pending", "limit_s": s.dry_limit_s if dry else s.limit_s} for s in chosen}}
    summary = write_summary(out, state, chosen)
    if budget_s is None:
        budget_s = float("inf") if dry else BUDGET_S
    deadline = time.monotonic() + budget_s
    for s in chosen:
        left = deadline - time.monotonic()
        limit = min(state["steps"][s.name]["limit_s"], left)
        if left < MIN_STEP_S:
            state["steps"][s.name]["status"] = "skipped (the 8-minute budget is spent)"
        else:
            cmds = step_commands(s.name, out, dry=dry)
            logs = [out / "logs" / f"{s.name}{'' if len(cmds) == 1 else f'_{i}'}.log" for i in range(len(cmds))]
            print(f"[gpu_check] {s.name}: {s.title} (limit {limit:.0f} s)", flush=True)
            state["steps"][s.name].update(run_child(cmds, limit, logs), limit_s=round(limit))
            print(f"[gpu_check] {s.name}: {state['steps'][s.name]['status']} in {state['steps'][s.name]['seconds']} s",
                  flush=True)
        summary = write_summary(out, state, chosen)
    return summary
