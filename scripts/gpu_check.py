#!/usr/bin/env python
"""The GPU check in one call: gradients in bf16 at T % 128 == 64, every PE's training step with and
without the fused attention paths, a 60-minute recording in one pass, and both recipes' smoke runs
with trainer=gpu, each step under its own time limit, within 8 minutes, into one folder whose
summary.md / summary.json are rewritten after every step. The check is `asr_pe/bench/gpu_check.py`.

    python scripts/gpu_check.py --out gpu_check                  # on a CUDA machine
    python scripts/gpu_check.py --out /tmp/gc --dry              # tiny, on CPU (the default without CUDA)
    python scripts/gpu_check.py --out /tmp/gc --dry --steps grad long
"""

import argparse
import sys

from asr_pe.bench.gpu_check import STEPS, run_gpu_check

STEP_FAILED = 3  # a step failed or ran out of time: the summary says which (0: every step ok)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu_check", help="the one folder everything is written into")
    p.add_argument("--dry", action="store_true", default=None,
                   help="tiny sizes on CPU (what happens anyway when no CUDA device is found)")
    p.add_argument("--steps", nargs="+", choices=[s.name for s in STEPS], default=None,
                   help="run only these steps (default: all, in the order listed)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    summary = run_gpu_check(args.out, dry=args.dry, steps=args.steps,
                            argv=list(sys.argv[1:] if argv is None else argv))
    print(open(f"{args.out}/summary.md").read())
    return 0 if all(s["status"] == "ok" for s in summary["steps"].values()) else STEP_FAILED


if __name__ == "__main__":
    sys.exit(main())
