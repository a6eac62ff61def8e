"""The GPU check's report: ``summary.json`` and ``summary.md`` in its output folder, built from the
files its steps wrote (`asr_pe.bench.gpu_check`), rewritten atomically after every step."""

from __future__ import annotations

import csv
import importlib.metadata
import json
import math
import os
import platform
import subprocess
from pathlib import Path

import torch

from asr_pe.io import atomic_write_text

__all__ = ["environment", "step_rows", "write_summary"]


def environment() -> dict:
    """The machine and the versions the numbers belong to."""
    env = {"python": platform.python_version(), "cpus": os.cpu_count(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "gpu": None, "driver": None}
    for pkg in ("lightning", "torchaudio", "hydra-core"):
        try:
            env[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            env[pkg] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=False).stdout.strip()
            env["gpu"], env["gpu_memory"], env["driver"] = [x.strip() for x in out.splitlines()[0].split(",")]
        except (OSError, subprocess.SubprocessError, IndexError, ValueError):
            pass
    return env


def _num(v):
    """CSV cell -> int / float / str as it reads."""
    for cast in (int, float):
        try:
            return cast(v)
        except (TypeError, ValueError):
            continue
    return v


def _read_csv(pattern: str, folder: Path) -> list[dict]:
    files = sorted(folder.glob(pattern))
    if not files:
        return []
    with open(files[0], newline="") as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


BENCH_STEPS = ("bench_fused", "bench_flex", "bench_reference")  # one per attention path of the benchmark


def _read_json_rows(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return []


def step_rows(step: str, out: Path) -> list[dict]:
    """The rows a step left in ``out`` (whatever it wrote before it ended or was stopped)."""
    if step == "grad":
        return _read_json_rows(out / "grad" / "grad_check.json")
    if step in BENCH_STEPS:
        return _read_csv("bench_train_*.csv", out / step)
    if step == "long":
        return _read_csv("bench_long_*.csv", out / "long")
    if step == "smoke":
        rows = []
        for res in sorted((out / "smoke").glob("*/result.json")):
            data = json.loads(res.read_text())
            rows += [{**r, "exit": data["exit"]} for r in data["rows"]]
        return rows
    raise ValueError(f"unknown step {step!r}")


def _f(v, fmt="{:.1f}") -> str:
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    if isinstance(v, float) and 0 < abs(v) < 1 and fmt == "{:.1f}":
        return f"{v:.2g}"  # a small loss or a fraction of a minute keeps its digits
    return fmt.format(v) if isinstance(v, float) else str(v)


def _bench_table(by_path: dict[str, list[dict]]) -> list[str]:
    """One row per PE, a column per length and attention path (``fused``, ``flex``, ``reference``)."""
    every = [r for rows in by_path.values() for r in rows]
    Ts = sorted({r["T"] for r in every})
    pes = list(dict.fromkeys(r["pe"] for r in every))
    by = {(path, r["pe"], r["T"]): r for path, rows in by_path.items() for r in rows}

    def cell(r):
        if r is None:
            return "-"
        if r.get("status", "ok") != "ok":
            return str(r["status"])
        return f"{_f(r['ms_per_step'])} ({_f(r['ratio_to_none'], '{:.2f}')}) / {_f(r['peak_mem_mb'], '{:.0f}')}"

    paths = list(by_path)
    head = "| pe | " + " | ".join(f"T={T} {path}" for T in Ts for path in paths) + " |"
    lines = [head, "|---|" + "---|" * (len(Ts) * len(paths))]
    for pe in pes:
        lines.append(f"| {pe} | " + " | ".join(cell(by.get((path, pe, T))) for T in Ts for path in paths) + " |")
    return lines


def _table(rows: list[dict], cols: list[tuple[str, str]]) -> list[str]:
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_f(r.get(k)) for k, _ in cols) + " |")
    return lines


def markdown(summary: dict) -> str:
    env, steps = summary["environment"], summary["steps"]
    mode = "dry run on CPU (tiny sizes; says the steps work, not what a GPU measures)" if summary["dry"] else "GPU run"
    lines = ["# GPU check (issue 47)", "",
             f"- {mode}, started {summary['started']}",
             f"- command: `python scripts/gpu_check.py {' '.join(summary['argv'])}`",
             f"- GPU: {env.get('gpu') or 'none'}" + (f" ({env.get('gpu_memory')}, driver {env.get('driver')})"
                                                      if env.get("driver") else ""),
             f"- torch {env['torch']} (CUDA {env['cuda']}, cuDNN {env['cudnn']}), torchaudio {env.get('torchaudio')}, "
             f"Lightning {env.get('lightning')}, Python {env['python']}, {env['cpus']} CPUs", "",
             "| step | what | status | seconds (limit) | rows |", "|---|---|---|---|---|"]
    for name, s in steps.items():
        lines.append(f"| {name} | {s['title']} | {s['status']} | {_f(s.get('seconds'))} ({s['limit_s']}) | {len(s['rows'])} |")
    if "grad" in steps:
        rows = steps["grad"]["rows"]
        lines += ["", "## (d) Gradients in bf16 at T % 128 == 64", "",
                  "pytorch/pytorch#196678's inputs (every logit ≈ -120, lower-triangular boolean mask, head size 64, "
                  "bf16): SDPA as torch chooses, with cuDNN forced, and through the project's `sdpa`:", ""]
        lines += _table([r for r in rows if r.get("check") == "probe"],
                        [("variant", "variant"), ("T", "T"), ("nonfinite_grad_q", "non-finite grad_q"),
                         ("nonfinite_grad_kv", "non-finite grad_k+v"), ("forward_backends", "forward backend"),
                         ("backward_backends", "backward backend"), ("status", "status")])
        lines += ["", "One training step of each PE's encoder (bf16 autocast, padded batch):", ""]
        lines += _table([r for r in rows if r.get("check") != "probe"],
                        [("pe", "pe"), ("T", "T"), ("lengths", "lengths"), ("loss", "loss"),
                         ("nonfinite_grads", "non-finite grads"), ("params_without_grad", "params without grad"),
                         ("forward_backends", "SDPA forward (calls)"), ("backward_backends", "SDPA backward"),
                         ("status", "status")])
    benched = {s.removeprefix("bench_"): steps[s].get("rows", []) for s in BENCH_STEPS if s in steps}
    if benched:
        lines += ["", "## (b) Training step per PE (bf16 autocast, forward + backward)", "",
                  "Cells: median ms (ratio to `none` of the same run) / peak MiB of one step; `flex`: "
                  "FlexAttention wherever the PE offers its bias in compact form (T5, ALiBi, Shaw, relative), "
                  "the other PEs as `fused`.", ""]
        lines += _bench_table(benched)
    if "long" in steps:
        lines += ["", "## (c) One long recording, full context, one pass", ""]
        lines += _table(steps["long"]["rows"], [("pe", "pe"), ("minutes", "minutes"), ("frames", "encoder frames"),
                                                ("seconds", "seconds"), ("peak_gpu_mb", "GPU peak MiB"),
                                                ("peak_rss_mb", "peak RSS MiB"), ("status", "status")])
    if "smoke" in steps:
        lines += ["", "## (a) The recipes' smoke runs", ""]
        lines += _table(steps["smoke"]["rows"], [("recipe", "recipe"), ("pe", "pe"), ("test_set", "test set"),
                                                 ("accelerator", "accelerator"), ("precision", "precision"),
                                                 ("cer", "CER %"), ("wer", "WER %"), ("utterances", "utterances"),
                                                 ("loss_first", "first loss"), ("loss_last", "last loss"),
                                                 ("exit", "run.sh exit")])
    return "\n".join(lines) + "\n"


def write_summary(out: Path, state: dict, steps) -> dict:
    """Collect every chosen step's rows into the summary; write summary.json and summary.md."""
    if "environment" not in state:
        state["environment"] = environment()
    summary = {"dry": state["dry"], "argv": state["argv"], "started": state["started"],
               "environment": state["environment"], "steps": {}}
    for s in steps:
        info = state["steps"][s.name]
        rows = step_rows(s.name, out)
        pes = sorted({r["pe"] for r in rows if r.get("pe")})
        summary["steps"][s.name] = {"title": s.title, **info, "rows": rows, "pes": pes}
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, default=str) + "\n")
    atomic_write_text(out / "summary.md", markdown(summary))
    return summary
