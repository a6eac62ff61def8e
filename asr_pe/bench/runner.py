"""Cost of every positional encoding in the encoder: the two modes and their options.

* ``train``: forward + backward of the encoder alone (default: Conformer, 6 layers, d = 144,
  4 heads, FFN 576, conv kernel 15, batch 8, padded lengths 100 % … 75 % of T) for every PE at
  T ∈ {100, 250, 500, 1000, 2000} encoder frames (``attention="reference"``: every attention on its
  written-out reference path instead of the fused ones; a PE that runs out of device memory at a T
  is a row with that status). Models are timed interleaved (one step of
  each in turn, the order rotated every repetition) after warm-up, so load drift on a shared
  machine hits every PE alike; the median is reported with its ratio to ``pe=none`` measured
  in the same process, and from 6 repetitions the median of the per-repetition ratios with a
  95 % interval (``median_interval``), by which ``cases.target_status`` judges a target.
  ``torchaudio.models.Conformer`` of the same size is a reference row.
  Peak memory of one step (`asr_pe.bench.measure.PeakMemory`) is measured in a separate pass
  after the timings.
* ``long``: inference only (front end + encoder, ``torch.inference_mode``) over one long
  recording of 1, 10, 60 minutes, full-context (``asr_pe.inference.full_context``, attention in
  query blocks) and/or chunked (``asr_pe.inference.chunked``). Each (PE, length, mode) runs in
  a child process (`asr_pe.bench.long_worker`) so that its peak RSS (``ru_maxrss``) is its own.

`run_benchmark` runs either, prints the table and writes ``<out>/bench_<mode>_<device>.csv``
and ``.md`` (`asr_pe.bench.report`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from asr_pe.errors import UserError
from .cases import ALL_PES, FRAME_SHIFT_S, REFERENCE, TARGET_LENGTHS, TARGETS, build_model, pe_options
from .measure import PeakMemory, fix_malloc_for_rss, sync, timed
from .config import BenchConfig
from .report import machine_info, write_outputs

__all__ = [
    "ALL_PES", "REFERENCE", "TARGETS", "TARGET_LENGTHS", "FRAME_SHIFT_S", "TRAIN_COLUMNS", "LONG_COLUMNS",
    "BenchConfig", "BenchError", "OUT_OF_MEMORY", "pe_options", "build_model", "batch_lengths", "train_step",
    "median_interval", "paired_ratios", "train_rows", "failed_row",
    "run_train", "long_spec", "run_long", "run_benchmark",
]

PRECISIONS = ("32", "bf16")
ATTENTION_PATHS = ("fused", "flex", "reference")  # the model's own (fused) paths, flex forced, or written out
TRAIN_COLUMNS = ("mode", "pe", "T", "batch", "precision", "ms_per_step", "ratio_to_none", "min_ms", "cpu_ms",
                 "cpu_ratio_to_none", "paired_ratio", "paired_lo", "paired_hi", "reps", "peak_mem_mb", "status")
# the coverage of the interval around the median paired ratio (``median_interval``)
PAIRED_LEVEL = 0.95
OUT_OF_MEMORY = "out of memory"  # the status of a PE whose step does not fit the device at that length
# every key a long-mode row can have (a failed run has no measurements: its CSV cells are empty)
LONG_COLUMNS = ("mode", "pe", "minutes", "infer", "block_size", "chunk_s", "overlap_s", "pe_options", "status",
                "frames", "seconds", "peak_rss_mb", "peak_extra_mb", "input_mb", "peak_gpu_mb", "gpu_extra_mb")


class BenchError(UserError, ValueError):
    """A benchmark that cannot run as asked (no CUDA device, long mode off the CPU)."""


# --------------------------------------------------------------------------------------------
# train mode
# --------------------------------------------------------------------------------------------
def batch_lengths(T: int, B: int) -> torch.Tensor:
    """Padded batch: lengths spread evenly from T down to ⌈0.75 T⌉ (longest first)."""
    lo = math.ceil(0.75 * T)
    return torch.linspace(T, lo, B).round().long().clamp(1, T)


def train_step(model, x, lengths, precision: str = "32"):
    """One forward + backward; parameters' grads are reset to None first. ``precision="bf16"``:
    the forward under bfloat16 autocast, as Lightning's ``bf16-mixed`` runs it (weights, grads and
    the loss stay fp32)."""
    assert precision in PRECISIONS, f"precision {precision!r}: choose one of {PRECISIONS}"
    for p in model.parameters():
        p.grad = None
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        out, _ = model(x, lengths)
    loss = out.float().square().mean()
    loss.backward()
    return loss


def _batch(cfg: BenchConfig, T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(T)
    x = torch.randn(cfg.batch, T, cfg.d_model, generator=gen).to(device)
    return x, batch_lengths(T, cfg.batch).to(device)


def median_interval(values: list[float], level: float = PAIRED_LEVEL) -> tuple[float, float]:
    """A distribution-free interval for the median of the population ``values`` were drawn from:
    the order statistics [x_(l), x_(n+1−l)] (1-based) with the largest l whose coverage,
    1 − 2·P(Binomial(n, ½) ≤ l − 1), is still at least ``level``. (NaN, NaN) when even
    [min, max] covers less (n ≤ 5 at 95 %: 1 − 2/2⁵ = 93.75 %)."""
    x, n = sorted(values), len(values)
    below, l = 0.0, 0  # P(Bin(n, ½) ≤ l − 1), summed as l grows
    while l < n // 2 and 1 - 2 * (below + math.comb(n, l) / 2 ** n) >= level:
        below += math.comb(n, l) / 2 ** n
        l += 1
    if l == 0:
        return float("nan"), float("nan")
    return x[l - 1], x[n - l]


def paired_ratios(times: list[float], base: list[float]) -> list[float]:
    """Each repetition's step time over ``none``'s step of the same repetition (the runner times
    one step of every PE per repetition, so the two are seconds apart and share the machine's
    load of that moment); [] when the two were not measured the same number of times."""
    return [t / b for t, b in zip(times, base)] if len(times) == len(base) else []


def train_rows(T: int, batch: int, times: dict[str, list[float]], cpu: dict[str, list[float]],
               precision: str = "32") -> list[dict]:
    """Rows (`TRAIN_COLUMNS`) of one length from per-step seconds (wall and CPU) per name.

    Ratios divide each median by that of ``none`` from the same ``times``/``cpu`` (the same
    run), before rounding; NaN when ``none`` was not measured. ``paired_ratio``: the median of
    the per-repetition ratios (``paired_ratios``, wall time), with ``median_interval``'s 95 %
    interval in ``paired_lo`` / ``paired_hi``: what it resamples is the steps of this one run, so
    it says how well this run pins its ratio down, not how another process would measure it.
    Peak memory is NaN until the memory pass fills it in.
    """
    med = {n: statistics.median(v) * 1000 for n, v in times.items()}
    cmed = {n: statistics.median(v) * 1000 for n, v in cpu.items()}
    base, cbase = med.get("none"), cmed.get("none")
    nan = float("nan")

    def paired(n: str) -> tuple[float, float, float]:
        ratios = paired_ratios(times[n], times.get("none", []))
        if not ratios:
            return nan, nan, nan
        lo, hi = median_interval(ratios)
        return (round(statistics.median(ratios), 3),
                *(nan if math.isnan(v) else round(v, 3) for v in (lo, hi)))

    return [{
        "mode": "train", "pe": n, "T": T, "batch": batch, "precision": precision,
        "ms_per_step": round(med[n], 2),
        "ratio_to_none": round(med[n] / base, 3) if base else float("nan"),
        "min_ms": round(min(times[n]) * 1000, 2),
        "cpu_ms": round(cmed[n], 2),
        "cpu_ratio_to_none": round(cmed[n] / cbase, 3) if cbase else float("nan"),
        **dict(zip(("paired_ratio", "paired_lo", "paired_hi"), paired(n))),
        "reps": len(times[n]),
        "peak_mem_mb": float("nan"),
        "status": "ok",
    } for n in times]


def failed_row(pe: str, T: int, batch: int, precision: str, status: str) -> dict:
    """A `TRAIN_COLUMNS` row of a PE that could not be measured at T (e.g. `OUT_OF_MEMORY`)."""
    nan = float("nan")
    return {"mode": "train", "pe": pe, "T": T, "batch": batch, "precision": precision, "ms_per_step": nan,
            "ratio_to_none": nan, "min_ms": nan, "cpu_ms": nan, "cpu_ratio_to_none": nan,
            "paired_ratio": nan, "paired_lo": nan, "paired_hi": nan, "reps": 0,
            "peak_mem_mb": nan, "status": status}


def _fits(fn, *args):
    """``fn(*args)``, or None when the device runs out of memory. The failed step's tensors are
    freed when this returns (the exception and its frames are gone), before ``_release``."""
    try:
        return fn(*args)
    except torch.OutOfMemoryError:
        return None


def _peak_memory(model, x, lengths, cfg: BenchConfig, device: torch.device) -> list[float]:
    """Peak memory (MiB) of ``cfg.mem_reps`` steps, after one that allocates the gradients."""
    train_step(model, x, lengths, cfg.precision)  # grads allocated: measure the steady state
    peaks = []
    for _ in range(cfg.mem_reps):
        with PeakMemory(device) as pm:
            train_step(model, x, lengths, cfg.precision)
        peaks.append(pm.peak_mb)
    return peaks


def _release(model, device: torch.device) -> None:
    """After an out-of-memory step: drop the model's gradients and the allocator's cached blocks."""
    for p in model.parameters():
        p.grad = None
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_train(cfg: BenchConfig, device: torch.device) -> list[dict]:
    """Train-mode rows: every PE of ``cfg.pes`` (+ REFERENCE) at every length of ``cfg.lengths``."""
    names = list(cfg.pes) + ([REFERENCE] if cfg.reference else [])
    max_T = max(cfg.lengths)
    models = {}
    for n in names:
        try:
            models[n] = build_model(n, cfg, max_T).to(device).train()
        except (ImportError, ValueError, TypeError) as e:  # one PE that cannot be built must not stop the others
            print(f"[bench] skipping {n}: {type(e).__name__}: {e}", file=sys.stderr)
    names = [n for n in names if n in models]
    rows = []
    for T in cfg.lengths:
        x, lengths = _batch(cfg, T, device)
        # A PE whose step does not fit the device at this T (the reference path stores (B, H, T, T)
        # tensors) is a row with that status; the others are still measured.
        failed: dict[str, str] = {}
        times: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        for n in names:  # warm-up (allocator, kernels, caches)
            for _ in range(cfg.warmup):
                if _fits(train_step, models[n], x, lengths, cfg.precision) is None:
                    failed[n] = OUT_OF_MEMORY
                    _release(models[n], device)
                    break
        sync(device)
        for rep in range(cfg.reps):
            k = rep % len(names)
            order = names[k:] + names[:k]  # rotate so no PE always runs right after another
            for n in order:
                if n in failed:
                    continue
                step = functools.partial(train_step, models[n], x, lengths, cfg.precision)
                wall_cpu = _fits(timed, step, device)
                if wall_cpu is None:
                    failed[n] = OUT_OF_MEMORY
                    _release(models[n], device)
                    continue
                times[n].append(wall_cpu[0])
                cpu[n].append(wall_cpu[1])
        ok = [n for n in names if n not in failed]
        measured = train_rows(T, cfg.batch, {n: times[n] for n in ok}, {n: cpu[n] for n in ok}, cfg.precision)
        by_pe = {r["pe"]: r for r in measured}
        rows += [by_pe[n] if n in by_pe else failed_row(n, T, cfg.batch, cfg.precision, failed[n]) for n in names]
        line = "  ".join(f"{n}={statistics.median(times[n]) * 1000:.0f}" if n in by_pe else f"{n}={failed[n]}"
                         for n in names)
        print(f"[bench] T={T}: {line} (ms, median of {cfg.reps})", flush=True)
        if cfg.out:  # the timings so far survive a run stopped before the memory pass
            write_outputs(rows, cfg, device)
    if cfg.memory:
        if device.type == "cpu":
            fix_malloc_for_rss()
        for T in cfg.lengths:
            x, lengths = _batch(cfg, T, device)
            for n in names:
                row = next(r for r in rows if r["pe"] == n and r["T"] == T)
                if row["status"] != "ok":
                    continue
                peaks = _fits(_peak_memory, models[n], x, lengths, cfg, device)
                if peaks is None:
                    row["status"] = OUT_OF_MEMORY + " (memory pass)"
                    _release(models[n], device)
                    continue
                row["peak_mem_mb"] = round(statistics.median(peaks), 1)
    return rows


# --------------------------------------------------------------------------------------------
# long mode
# --------------------------------------------------------------------------------------------
def long_spec(cfg: BenchConfig, pe: str, minutes: float, infer: str, device: str = "cpu") -> dict:
    """What one child process (`asr_pe.bench.long_worker.long_worker`) measures."""
    opts = {"policy": "wrap"} if pe == "learned" else {}
    return {
        "pe": pe, "minutes": minutes, "infer": infer, "threads": cfg.threads,
        "encoder": cfg.encoder, "d_model": cfg.d_model, "heads": cfg.heads, "layers": cfg.layers,
        "ffn": cfg.ffn, "conv_kernel": cfg.conv_kernel, "block_size": cfg.block_size or "auto",
        "chunk_s": cfg.chunk_s, "overlap_s": cfg.overlap_s, "pe_options": opts, "device": device,
    }


def _worker_env() -> dict:
    """The child imports asr_pe from where this process did (a checkout need not be installed)."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def run_long(cfg: BenchConfig, device: torch.device = torch.device("cpu")) -> list[dict]:
    """Long-mode rows, one child process each; a failed or timed-out run is a row with its status.

    With ``cfg.out`` the files are rewritten after every run, so a long sweep keeps what it measured.
    """
    rows = []
    for minutes in cfg.minutes:
        for infer in cfg.infer:
            for pe in cfg.pes:
                spec = long_spec(cfg, pe, minutes, infer, device.type)
                opts = spec["pe_options"]
                row = {"mode": "long", "pe": pe, "minutes": minutes, "infer": infer,
                       "block_size": spec["block_size"] if infer == "full" else "",
                       "chunk_s": cfg.chunk_s if infer == "chunked" else "",
                       "overlap_s": cfg.overlap_s if infer == "chunked" else "",
                       "pe_options": json.dumps(opts) if opts else ""}
                t0 = time.time()
                try:
                    proc = subprocess.run(
                        [sys.executable, "-m", "asr_pe.bench.long_worker", json.dumps(spec)],
                        capture_output=True, text=True, timeout=cfg.timeout, check=False, env=_worker_env(),
                    )
                    if proc.returncode != 0:
                        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                                           f"exit {proc.returncode}")
                    row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
                    row["status"] = "ok"
                except subprocess.TimeoutExpired:
                    row["status"] = f"timeout after {cfg.timeout} s"
                except (RuntimeError, ValueError, OSError) as e:  # recorded in the table, the sweep goes on
                    row["status"] = f"failed: {e}"
                gpu = f", GPU peak {row.get('peak_gpu_mb', '-')} MiB" if device.type == "cuda" else ""
                print(f"[bench] {minutes} min {infer} pe={pe}: {row.get('seconds', '-')} s, "
                      f"peak RSS {row.get('peak_rss_mb', '-')} MiB{gpu} ({row['status']}, wall {time.time() - t0:.0f} s)",
                      flush=True)
                rows.append(row)
                if cfg.out:
                    write_outputs(rows, cfg, device)
    return rows


# --------------------------------------------------------------------------------------------
# both
# --------------------------------------------------------------------------------------------
def run_benchmark(cfg: BenchConfig) -> tuple[Path, Path]:
    """Run ``cfg.mode``, write the CSV and markdown into ``cfg.out``, print the table -> (csv, md).

    Raises `BenchError` for a CUDA device that is not there.
    """
    torch.set_num_threads(cfg.threads)
    dev = cfg.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(dev)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError("--device cuda but no CUDA device is available")
    print(f"[bench] {cfg.mode} mode on {machine_info(device)}", flush=True)
    if cfg.attention not in ATTENTION_PATHS:
        raise BenchError(f"attention {cfg.attention!r}: choose one of {ATTENTION_PATHS}")
    if cfg.mode == "train":
        rows = run_train(cfg, device)
    elif cfg.mode == "long":
        rows = run_long(cfg, device)
    else:
        raise BenchError(f"unknown mode {cfg.mode!r} (train | long)")
    csv_path, md_path = write_outputs(rows, cfg, device)
    print()
    print(md_path.read_text())
    print(f"[bench] wrote {csv_path} and {md_path}")
    return csv_path, md_path
