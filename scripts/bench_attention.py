#!/usr/bin/env python
"""Benchmark the cost of every positional encoding in the encoder (issue 6).

Two modes:

* ``train`` (default): forward + backward of the encoder alone (default: Conformer, 6 layers,
  d = 144, 4 heads, FFN 576, conv kernel 15, batch 8, padded lengths 100 % … 75 % of T) for
  every PE at T ∈ {100, 250, 500, 1000, 2000} encoder frames. Models are timed interleaved
  (one step of each in turn, the order rotated every repetition) after warm-up, so load
  drift on a shared machine hits every PE alike; the median is reported with its ratio to
  ``pe=none`` measured in the same process. ``torchaudio.models.Conformer`` of the same
  size is a reference row. Peak memory of one step (CUDA ``max_memory_allocated`` delta, or
  on CPU the peak RSS delta sampled by a thread with glibc's mmap threshold fixed so that
  freed tensors leave the resident set) is measured in a separate pass after the timings.
* ``long``: inference only (front end + encoder, ``torch.inference_mode``) over one long
  recording of 1, 10, 60 minutes, full-context (``asr_pe.inference.long_form``, attention
  in query blocks) and/or chunked (``asr_pe.inference.chunked``). Each (PE, length, mode)
  runs in a child process so that its peak RSS (``ru_maxrss``) is its own.

Both print a table and write ``<out>/bench_<mode>_<device>.csv`` and ``.md``.

    python scripts/bench_attention.py                              # train mode, all PEs
    python scripts/bench_attention.py --lengths 250 1000 --reps 9
    python scripts/bench_attention.py --mode long --minutes 1 10 --pes none rope relative
    python scripts/bench_attention.py --smoke                       # tiny sizes, one rep (tests)
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import ctypes.util
import datetime as dt
import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing the package
    sys.path.insert(0, str(REPO))

import torch

ALL_PES = ["none", "sinusoidal", "learned", "cape", "conv", "rope", "alibi", "t5", "shaw", "relative", "rem"]
REFERENCE = "torchaudio_conformer"
# Issue 6 targets: ratio to pe=none (2 CPU threads, default shape) at T = 250 and T = 1000.
TARGETS = {
    **{pe: 1.05 for pe in ("sinusoidal", "learned", "cape", "conv", "rope")},
    **{pe: 1.25 for pe in ("t5", "alibi", "rem")},
    **{pe: 1.30 for pe in ("shaw", "relative")},
    REFERENCE: None,
}
TARGET_LENGTHS = (250, 1000)
FRAME_SHIFT_S = 0.04  # encoder frame step of the default Conv2d 4x front end at 10 ms features


# --------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------
def pe_options(pe: str, max_frames: int) -> dict:
    """Benchmark options per PE: the learned table must hold the longest input."""
    if pe == "learned":
        return {"max_len": max(2048, max_frames)}
    return {}


def build_model(name: str, args, max_frames: int) -> torch.nn.Module:
    """The encoder for a PE name, or torchaudio's Conformer of the same size for REFERENCE."""
    torch.manual_seed(0)
    if name == REFERENCE:
        import torchaudio

        model = torchaudio.models.Conformer(
            input_dim=args.d_model, num_heads=args.heads, ffn_dim=args.ffn, num_layers=args.layers,
            depthwise_conv_kernel_size=args.conv_kernel, dropout=args.dropout,
        )
    else:
        from asr_pe.models.encoder import build_encoder

        model = build_encoder(
            kind=args.encoder, pe=name, d_model=args.d_model, n_heads=args.heads, n_layers=args.layers,
            ffn_dim=args.ffn, conv_kernel=args.conv_kernel, dropout=args.dropout, frame_shift_s=FRAME_SHIFT_S,
            block_size=args.block_size, **pe_options(name, max_frames),
        )
    return model


def batch_lengths(T: int, B: int) -> torch.Tensor:
    """Padded batch: lengths spread evenly from T down to ⌈0.75 T⌉ (longest first)."""
    lo = math.ceil(0.75 * T)
    return torch.linspace(T, lo, B).round().long().clamp(1, T)


def train_step(model, x, lengths):
    """One forward + backward; parameters' grads are reset to None first."""
    for p in model.parameters():
        p.grad = None
    out, _ = model(x, lengths)
    loss = out.float().square().mean()
    loss.backward()
    return loss


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------------------------
# train mode
# --------------------------------------------------------------------------------------------
def run_train(args, device) -> list[dict]:
    names = list(args.pes) + ([REFERENCE] if args.reference else [])
    max_T = max(args.lengths)
    models = {}
    for n in names:
        try:
            models[n] = build_model(n, args, max_T).to(device).train()
        except (ImportError, ValueError, TypeError) as e:  # one PE that cannot be built must not stop the others
            print(f"[bench] skipping {n}: {type(e).__name__}: {e}", file=sys.stderr)
    names = [n for n in names if n in models]
    rows = []
    for T in args.lengths:
        gen = torch.Generator().manual_seed(T)
        x = torch.randn(args.batch, T, args.d_model, generator=gen).to(device)
        lengths = batch_lengths(T, args.batch).to(device)
        times: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        for n in names:  # warm-up (allocator, kernels, caches)
            for _ in range(args.warmup):
                train_step(models[n], x, lengths)
        sync(device)
        for rep in range(args.reps):
            k = rep % len(names)
            order = names[k:] + names[:k]  # rotate so no PE always runs right after another
            for n in order:
                sync(device)
                t0, c0 = time.perf_counter(), time.process_time()
                train_step(models[n], x, lengths)
                sync(device)
                times[n].append(time.perf_counter() - t0)
                cpu[n].append(time.process_time() - c0)
        med = {n: statistics.median(v) * 1000 for n, v in times.items()}
        cmed = {n: statistics.median(v) * 1000 for n, v in cpu.items()}
        base, cbase = med.get("none"), cmed.get("none")
        for n in names:
            rows.append({
                "mode": "train", "pe": n, "T": T, "batch": args.batch,
                "ms_per_step": round(med[n], 2),
                "ratio_to_none": round(med[n] / base, 3) if base else float("nan"),
                "min_ms": round(min(times[n]) * 1000, 2),
                # CPU time of the process (all threads): less sensitive than wall time to other
                # processes taking the cores, which a shared machine has plenty of
                "cpu_ms": round(cmed[n], 2),
                "cpu_ratio_to_none": round(cmed[n] / cbase, 3) if cbase else float("nan"),
                "reps": len(times[n]),
                "peak_mem_mb": float("nan"),
            })
        line = "  ".join(f"{n}={med[n]:.0f}" for n in names)
        print(f"[bench] T={T}: {line} (ms, median of {args.reps})", flush=True)
    if args.memory:
        if device.type == "cpu":
            fix_malloc_for_rss()
        for T in args.lengths:
            gen = torch.Generator().manual_seed(T)
            x = torch.randn(args.batch, T, args.d_model, generator=gen).to(device)
            lengths = batch_lengths(T, args.batch).to(device)
            for n in names:
                train_step(models[n], x, lengths)  # grads allocated: measure the steady state
                peaks = []
                for _ in range(args.mem_reps):
                    with PeakMemory(device) as pm:
                        train_step(models[n], x, lengths)
                    peaks.append(pm.peak_mb)
                row = next(r for r in rows if r["pe"] == n and r["T"] == T)
                row["peak_mem_mb"] = round(statistics.median(peaks), 1)
    return rows


# --------------------------------------------------------------------------------------------
# long mode
# --------------------------------------------------------------------------------------------
def long_worker(spec: dict) -> dict:
    """Runs in a child process: build an ASR model, encode one long random input, report."""
    torch.set_num_threads(spec["threads"])
    from asr_pe.inference.chunked import encode_chunked
    from asr_pe.inference.long_form import encode_full
    from asr_pe.models.asr import build_asr_model

    torch.manual_seed(0)
    pe = spec["pe"]
    n_feat = round(spec["minutes"] * 60 * 100)  # 10 ms feature frames
    opts = dict(spec["pe_options"])
    pe_cfg = {"input": {"name": pe, **opts}} if pe in ("sinusoidal", "learned", "cape", "conv") else pe
    if isinstance(pe_cfg, str) and opts:
        pe_cfg = {"attention": {"name": pe, **opts}}
    model = build_asr_model(
        vocab_size=32, in_features=80, frontend={"kind": "conv2d"},
        encoder={"kind": spec["encoder"], "d_model": spec["d_model"], "n_heads": spec["heads"],
                 "n_layers": spec["layers"], "ffn_dim": spec["ffn"], "conv_kernel": spec["conv_kernel"]},
        pe=pe_cfg,
    ).eval()
    feats = torch.randn(1, n_feat, 80, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([n_feat])
    trim_heap()
    base = current_rss() or 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        if spec["infer"] == "full":
            enc, enc_lengths = encode_full(model, feats, lengths, block_size=spec["block_size"])
        else:
            enc, enc_lengths = encode_chunked(model, feats, lengths, chunk_s=spec["chunk_s"],
                                              overlap_s=spec["overlap_s"])
        logp = model.ctc_log_probs(enc)
    seconds = time.perf_counter() - t0
    assert torch.isfinite(logp).all(), "non-finite output"
    return {
        "frames": int(enc_lengths[0]), "seconds": round(seconds, 2),
        "peak_rss_mb": round(max_rss_bytes() / 2**20, 1),
        "peak_extra_mb": round((max_rss_bytes() - base) / 2**20, 1),
        "input_mb": round(feats.numel() * 4 / 2**20, 1),
    }


def run_long(args) -> list[dict]:
    rows = []
    for minutes in args.minutes:
        for infer in args.infer:
            for pe in args.pes:
                opts = {"policy": "wrap"} if pe == "learned" else {}
                spec = {
                    "pe": pe, "minutes": minutes, "infer": infer, "threads": args.threads,
                    "encoder": args.encoder, "d_model": args.d_model, "heads": args.heads, "layers": args.layers,
                    "ffn": args.ffn, "conv_kernel": args.conv_kernel, "block_size": args.block_size or "auto",
                    "chunk_s": args.chunk_s, "overlap_s": args.overlap_s, "pe_options": opts,
                }
                row = {"mode": "long", "pe": pe, "minutes": minutes, "infer": infer,
                       "block_size": spec["block_size"] if infer == "full" else "",
                       "chunk_s": args.chunk_s if infer == "chunked" else "",
                       "overlap_s": args.overlap_s if infer == "chunked" else "",
                       "pe_options": json.dumps(opts) if opts else ""}
                t0 = time.time()
                try:
                    proc = subprocess.run(
                        [sys.executable, __file__, "--long-worker", json.dumps(spec)],
                        capture_output=True, text=True, timeout=args.timeout, check=False,
                    )
                    if proc.returncode != 0:
                        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                                           f"exit {proc.returncode}")
                    row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
                    row["status"] = "ok"
                except subprocess.TimeoutExpired:
                    row["status"] = f"timeout after {args.timeout} s"
                except (RuntimeError, ValueError, OSError) as e:  # recorded in the table, the sweep goes on
                    row["status"] = f"failed: {e}"
                print(f"[bench] {minutes} min {infer} pe={pe}: {row.get('seconds', '-')} s, "
                      f"peak RSS {row.get('peak_rss_mb', '-')} MiB ({row['status']}, wall {time.time() - t0:.0f} s)",
                      flush=True)
                rows.append(row)
                if args.out:  # write after every run: a long sweep keeps what it has measured
                    write_outputs(rows, args, torch.device("cpu"))
    return rows


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------
def machine_info(device: torch.device) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    info = f"{cpu}, {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} threads"
    if device.type == "cuda":
        info += f", GPU {torch.cuda.get_device_name(device)}"
    return info


def target_status(row: dict) -> str:
    tgt = TARGETS.get(row["pe"])
    if tgt is None or row["pe"] == "none" or row["T"] not in TARGET_LENGTHS:
        return ""
    r = row["ratio_to_none"]
    return "met" if r <= tgt else "MISSED"


def markdown(rows: list[dict], args, device) -> str:
    now = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    cmd = " ".join(["python scripts/bench_attention.py"] + list(args.argv))
    head = [f"<!-- generated by scripts/bench_attention.py on {now} -->", "",
            f"- command: `{cmd}`", f"- machine: {machine_info(device)}", f"- date: {now}", ""]
    if args.mode == "train":
        Ts = sorted({r["T"] for r in rows})
        pes = list(dict.fromkeys(r["pe"] for r in rows))
        by = {(r["pe"], r["T"]): r for r in rows}
        lines = ["| pe | target | " + " | ".join(f"T={T} ms (ratio; CPU-time ratio)" for T in Ts) + " | " +
                 " | ".join(f"T={T} MiB" for T in Ts) + " |",
                 "|---|---|" + "---|" * (2 * len(Ts))]
        for pe in pes:
            tgt = TARGETS.get(pe)
            cells = []
            for T in Ts:
                r = by[(pe, T)]
                st = target_status(r)
                mark = " ✗" if st == "MISSED" else ""
                cells.append(f"{r['ms_per_step']:.1f} ({r['ratio_to_none']:.2f}{mark}; {r['cpu_ratio_to_none']:.2f})")
            mem = [f"{by[(pe, T)]['peak_mem_mb']:.0f}" for T in Ts]
            lines.append(f"| {pe} | {f'≤ {tgt:.2f}' if tgt else '-'} | " + " | ".join(cells) + " | " +
                         " | ".join(mem) + " |")
        caption = (f"Forward+backward of the {args.encoder} encoder ({args.layers} layers, d={args.d_model}, "
                   f"{args.heads} heads, FFN {args.ffn}, conv kernel {args.conv_kernel}), batch "
                   f"{args.batch}, median of {args.reps} interleaved reps after {args.warmup} warm-up; "
                   "ratio to pe=none in the same run (wall time; then process CPU time, steadier "
                   "on a shared machine); ✗ = wall-time ratio above the target "
                   f"(checked at T = {', '.join(map(str, TARGET_LENGTHS))}).")
        return "\n".join([*head, caption, "", *lines]) + "\n"
    lines = ["| minutes | mode | pe | encoder frames | seconds | peak RSS MiB | extra over model MiB | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        opt = f" ({r['pe_options']})" if r.get("pe_options") else ""
        mode = r["infer"] + (f" block={r['block_size']}" if r["infer"] == "full" else
                             f" {r['chunk_s']}s+{r['overlap_s']}s")
        lines.append(f"| {r['minutes']} | {mode} | {r['pe']}{opt} | {r.get('frames', '-')} | {r.get('seconds', '-')} | "
                     f"{r.get('peak_rss_mb', '-')} | {r.get('peak_extra_mb', '-')} | {r['status']} |")
    caption = ("Inference (front end + encoder + CTC head, batch 1) over one random recording; each "
               "row is a separate process, peak RSS is its ru_maxrss.")
    return "\n".join([*head, caption, "", *lines]) + "\n"


def write_outputs(rows: list[dict], args, device) -> tuple[Path, Path]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"bench_{args.mode}_{device.type}"
    keys = list(dict.fromkeys(k for r in rows for k in r))
    tmp = stem.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, stem.with_suffix(".csv"))
    tmp = stem.with_suffix(".md.tmp")
    tmp.write_text(markdown(rows, args, device))
    os.replace(tmp, stem.with_suffix(".md"))
    return stem.with_suffix(".csv"), stem.with_suffix(".md")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("train", "long"), default="train")
    p.add_argument("--pes", nargs="+", default=ALL_PES, help="PE names (default: all)")
    p.add_argument("--lengths", nargs="+", type=int, default=[100, 250, 500, 1000, 2000], help="train mode: T frames")
    p.add_argument("--minutes", nargs="+", type=float, default=[1, 10, 60], help="long mode: recording lengths")
    p.add_argument("--infer", nargs="+", choices=("full", "chunked"), default=["full", "chunked"],
                   help="long mode: full-context and/or chunked inference")
    p.add_argument("--chunk-s", type=float, default=20.0)
    p.add_argument("--overlap-s", type=float, default=4.0)
    p.add_argument("--timeout", type=float, default=None, help="long mode: seconds per run (child killed after)")
    p.add_argument("--encoder", default="conformer", choices=("conformer", "transformer"))
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=144)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=576)
    p.add_argument("--conv-kernel", type=int, default=15)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--block-size", type=int, default=None, help="attention query block (train: none; long: auto)")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mem-reps", type=int, default=2)
    p.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory pass")
    p.add_argument("--no-reference", dest="reference", action="store_false", help="skip the torchaudio row")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--out", default="bench_results", help="folder for the CSV and markdown files")
    p.add_argument("--smoke", action="store_true", help="tiny sizes and one repetition (for the test suite)")
    p.add_argument("--long-worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in the markdown
    unknown = [pe for pe in args.pes if pe not in ALL_PES]
    if unknown:
        p.error(f"unknown PE(s) {unknown}; choose from {ALL_PES}")
    if args.smoke:
        args.layers, args.d_model, args.heads, args.ffn, args.batch = 2, 32, 2, 64, 2
        args.reps, args.warmup, args.mem_reps = 1, 0, 1
        if args.mode == "train":
            args.lengths = [16, 40]
        else:
            args.minutes = [0.05]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.long_worker:
        print(json.dumps(long_worker(json.loads(args.long_worker))))
        return 0
    torch.set_num_threads(args.threads)
    dev = args.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(dev)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is available", file=sys.stderr)
        return 2
    print(f"[bench] {args.mode} mode on {machine_info(device)}", flush=True)
    if args.mode == "train":
        rows = run_train(args, device)
    else:
        if device.type != "cpu":
            print("error: long mode measures CPU RSS; run it with --device cpu", file=sys.stderr)
            return 2
        rows = run_long(args)
    csv_path, md_path = write_outputs(rows, args, device)
    print()
    print(md_path.read_text())
    print(f"[bench] wrote {csv_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
