#!/usr/bin/env python
"""WER and CER per 5 s bin of a test set's natural utterances, one line per PE (the CAPE paper's figure).

    python scripts/plot_natural_bins.py exp/tedlium3/runs/* --test-set test --out exp/tedlium3/plots/test \\
        [--step 5] [--n-boot 1000] [--title TEXT] [--paper-caption] [--note TEXT]

Each path is a run dir or a folder searched for runs (archived study runs too). Reads each run's
eval/<set>/per_utt.jsonl (nothing is decoded) and writes <out>/natural_bins.{png,md,csv} and
natural_bins_runs.csv; the intervals resample utterances, then seeds: see asr_pe/plots/natural_bins.py.
"""

from __future__ import annotations

import argparse
import sys

from asr_pe.errors import UserError
from asr_pe.plots import cape_paper
from asr_pe.evaluation.buckets import NATURAL_BIN_S
from asr_pe.plots.natural_bins import natural_bins_report
from asr_pe.plots.wer_vs_length import print_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or folders holding them")
    parser.add_argument("--test-set", required=True, help="eval/<name> to bin (a set of natural utterances)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--step", type=float, default=NATURAL_BIN_S, help="bin width in seconds (default 5)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap draws per bin")
    parser.add_argument("--title", default=None)
    parser.add_argument("--paper-caption", action="store_true",
                        help="caption the figure and the table with what the CAPE paper did (asr_pe/plots/cape_paper.py)")
    parser.add_argument("--note", default=None, help="a sentence of your own after that caption (e.g. the corpus used)")
    args = parser.parse_args(argv)
    if not args.step > 0:
        parser.error(f"--step {args.step}: must be > 0 seconds")
    if args.n_boot < 1:
        parser.error(f"--n-boot {args.n_boot}: must be >= 1")
    return print_report(lambda: natural_bins_report(
        args.paths, args.out, test_set=args.test_set, step=args.step, n_boot=args.n_boot, title=args.title,
        caption=caption(args)),
        (UserError, FileNotFoundError, ValueError))



def caption(args) -> str | None:
    """--paper-caption's text (with --note), --note alone, or None."""
    if args.paper_caption:
        return cape_paper.caption("natural_bins", args.note)
    return args.note or None


if __name__ == "__main__":
    sys.exit(main())
