#!/usr/bin/env python
"""Benchmark the transducer head against CTC: training-step time and peak memory per encoder
length (ratios to CTC from the same run), and greedy transducer decoding of a long recording.
Prints a table and writes ``<out>/bench_heads_<device>.{csv,md}`` (asr_pe/bench/heads.py;
docs/benchmarks.md, "Transducer vs CTC").

    python scripts/bench_heads.py                                  # T = 250 and 1000, CPU, 1 thread
    python scripts/bench_heads.py --device cuda --precision bf16 --batch 16
    python scripts/bench_heads.py --lengths 50 --reps 1 --long-minutes 0.5   # seconds (tests)
"""

import argparse
import sys

from asr_pe.bench.heads import HEADS, HeadsConfig, run_heads_benchmark

D = HeadsConfig()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", nargs="+", type=int, default=D.lengths, help="encoder frames T (40 ms each)")
    p.add_argument("--heads", nargs="+", choices=HEADS, default=D.heads)
    for name in ("batch", "vocab", "d-model", "layers", "joiner-dim", "embed-dim", "reps", "warmup"):
        p.add_argument(f"--{name}", type=int, default=getattr(D, name.replace("-", "_")))
    p.add_argument("--tokens-per-frame", type=float, default=D.tokens_per_frame, help="U = this x T")
    p.add_argument("--budget-mb", type=float, default=D.budget_mb, help="lattice budget of the transducer_budget row")
    p.add_argument("--long-minutes", nargs="*", type=float, default=D.long_minutes,
                   help="greedy decoding of recordings this long (none: skip)")
    p.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory pass")
    p.add_argument("--device", default=D.device, help="cpu | cuda | auto")
    p.add_argument("--precision", choices=("32", "bf16"), default=D.precision)
    p.add_argument("--threads", type=int, default=D.threads)
    p.add_argument("--out", default=D.out)
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    cfg = HeadsConfig(lengths=a.lengths, heads=a.heads, batch=a.batch, vocab=a.vocab, d_model=a.d_model,
                      layers=a.layers, joiner_dim=a.joiner_dim, embed_dim=a.embed_dim, reps=a.reps, warmup=a.warmup,
                      tokens_per_frame=a.tokens_per_frame, budget_mb=a.budget_mb, long_minutes=a.long_minutes,
                      memory=a.memory, device=a.device, precision=a.precision, threads=a.threads, out=a.out)
    if any(t < 8 for t in cfg.lengths) or cfg.batch < 1 or cfg.reps < 1:
        print("error: --lengths must be >= 8 frames, --batch and --reps >= 1", file=sys.stderr)
        return 2
    if cfg.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print("error: --device cuda but torch sees no GPU; use --device cpu", file=sys.stderr)
            return 2
    run_heads_benchmark(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
