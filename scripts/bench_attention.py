#!/usr/bin/env python
"""Benchmark the cost of every positional encoding in the encoder.

``--mode train`` (default): forward + backward of the encoder per PE, interleaved, ratios to
``pe=none`` from the same run, then a peak-memory pass. ``--mode long``: inference over one long
recording, full-context and/or chunked, a child process per row. Both print a table and write
``<out>/bench_<mode>_<device>.csv`` and ``.md``. The benchmark is `asr_pe/bench/` (docs/benchmarks.md).

    python scripts/bench_attention.py                              # train mode, all PEs
    python scripts/bench_attention.py --lengths 250 1000 --reps 9
    python scripts/bench_attention.py --mode long --minutes 1 10 --pes none rope relative
    python scripts/bench_attention.py --smoke                       # tiny sizes, one rep (tests)
"""

import argparse
import sys

from asr_pe.bench.runner import ALL_PES, BenchConfig, BenchError, run_benchmark

D = BenchConfig()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("train", "long"), default=D.mode)
    p.add_argument("--pes", nargs="+", default=D.pes, help="PE names (default: all)")
    p.add_argument("--lengths", nargs="+", type=int, default=D.lengths, help="train mode: T frames")
    p.add_argument("--minutes", nargs="+", type=float, default=D.minutes, help="long mode: recording lengths")
    p.add_argument("--infer", nargs="+", choices=("full", "chunked"), default=D.infer,
                   help="long mode: full-context and/or chunked inference")
    p.add_argument("--chunk-s", type=float, default=D.chunk_s)
    p.add_argument("--overlap-s", type=float, default=D.overlap_s)
    p.add_argument("--timeout", type=float, default=D.timeout, help="long mode: seconds per run (child killed after)")
    p.add_argument("--encoder", default=D.encoder, choices=("conformer", "transformer"))
    for name in ("layers", "d-model", "heads", "ffn", "conv-kernel"):
        p.add_argument(f"--{name}", type=int, default=getattr(D, name.replace("-", "_")))
    p.add_argument("--dropout", type=float, default=D.dropout)
    p.add_argument("--batch", type=int, default=D.batch)
    p.add_argument("--block-size", type=int, default=D.block_size, help="attention query block (train: none; long: auto)")
    for name in ("reps", "warmup", "mem-reps"):
        p.add_argument(f"--{name}", type=int, default=getattr(D, name.replace("-", "_")))
    p.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory pass")
    p.add_argument("--no-reference", dest="reference", action="store_false", help="skip the torchaudio row")
    p.add_argument("--threads", type=int, default=D.threads)
    p.add_argument("--device", default=D.device, help="cpu | cuda | auto")
    p.add_argument("--precision", choices=("32", "bf16"), default=D.precision,
                   help="train mode: 32, or bf16 autocast as trainer=gpu trains (bf16-mixed)")
    p.add_argument("--attention", choices=("fused", "flex", "reference"), default=D.attention,
                   help="train mode: the model's fused attention paths, FlexAttention wherever a PE offers its bias "
                        "(CUDA), or every attention written out")
    p.add_argument("--out", default=D.out, help="folder for the CSV and markdown files")
    p.add_argument("--smoke", action="store_true", help="tiny sizes and one repetition (for the test suite)")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in the markdown
    unknown = [pe for pe in args.pes if pe not in ALL_PES]
    if unknown:
        p.error(f"unknown PE(s) {unknown}; choose from {ALL_PES}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = BenchConfig(**{k: v for k, v in vars(args).items() if k != "smoke"})
    try:
        run_benchmark(cfg.smoke() if args.smoke else cfg)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
