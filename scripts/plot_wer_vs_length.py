#!/usr/bin/env python
"""WER (or CER) versus input length across runs: PNG + long CSV + markdown tables.

    python scripts/plot_wer_vs_length.py runs/rope_s0 runs/sweep_2024/ --out figures/ \\
        [--test-set test_long] [--metric wer|cer] [--title TEXT] [--reference-set test]

Each argument is a run dir (holds run_info.json and eval/<test set>/buckets.csv) or a sweep
dir searched recursively. Seeds of one label are averaged; see asr_pe/plots/wer_vs_length.py.
Writes <out>/<metric>_vs_length.{png,csv,md}; the CSV holds WER and CER either way.
"""

from __future__ import annotations

import argparse
import sys

from asr_pe.plots.wer_vs_length import METRICS, RunDirError, make_report, print_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or sweep directories")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--test-set", default=None,
                        help="eval/<name> to plot (needed when the runs hold several)")
    parser.add_argument("--metric", choices=METRICS, default="wer")
    parser.add_argument("--title", default=None)
    parser.add_argument("--reference-set", default=None,
                        help="take the relative-degradation reference bucket from this test set of the "
                             "same runs (for long-form sets with no bucket inside the training lengths)")
    args = parser.parse_args(argv)
    return print_report(lambda: make_report(
        args.paths, args.out, test_set=args.test_set, metric=args.metric,
        title=args.title, reference_set=args.reference_set),
        (RunDirError, FileNotFoundError, ValueError))


if __name__ == "__main__":
    sys.exit(main())
