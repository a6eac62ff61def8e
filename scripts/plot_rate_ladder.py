#!/usr/bin/env python
"""Error rate versus speaking rate per PE: the same utterances at every rung of a rate ladder.

    python scripts/plot_rate_ladder.py runs/rope_ctc_s* runs/cape_ctc_s* --test-set test --out report/ \\
        [--axis tempo|hop_ms] [--values 0.8 0.9 1.0 1.1 1.2 1.3] [--suffix _x] [--metric wer|cer] [--n-boot 1000] \\
        [--paper-caption] [--note TEXT]

Each path is a run dir or a folder searched for runs; every run needs every rung decoded
(scripts/evaluate_rates.py) and the plain eval/<set>. Writes <out>/rate_<axis>.{png,md,csv}: the
rate per rung with a crossed (utterances x seeds) CI and its ratio to the plain rung; see
asr_pe/plots/rate_ladder.py.
"""

from __future__ import annotations

import argparse
import sys

from asr_pe.errors import UserError
from asr_pe.plots import cape_paper
from asr_pe.evaluation.rate_ladder import AXES
from asr_pe.plots.rate_ladder import COUNTS, rate_report
from asr_pe.plots.wer_vs_length import print_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or folders holding them")
    parser.add_argument("--test-set", required=True, help="the set decoded at every rung (eval/<name>)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--axis", choices=AXES, default="tempo")
    parser.add_argument("--values", type=float, nargs="+", default=None,
                        help="the rungs (default: tempo 0.8 ... 1.3, hop_ms 8 ... 12)")
    parser.add_argument("--suffix", default="", help="the evaluation's own eval.suffix, before the rate's")
    parser.add_argument("--metric", choices=tuple(COUNTS), default="wer", help="the figure's metric (tables: both)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap draws")
    parser.add_argument("--title", default=None)
    parser.add_argument("--paper-caption", action="store_true",
                        help="caption the figure and the table with what the CAPE paper did (asr_pe/plots/cape_paper.py)")
    parser.add_argument("--note", default=None, help="a sentence of your own after that caption (e.g. the corpus used)")
    args = parser.parse_args(argv)
    if args.n_boot < 1:
        parser.error(f"--n-boot {args.n_boot}: must be >= 1")
    return print_report(lambda: rate_report(
        args.paths, args.out, test_set=args.test_set, axis=args.axis, values=args.values,
        suffix=args.suffix, metric=args.metric, n_boot=args.n_boot, title=args.title, caption=caption(args)),
        (UserError, FileNotFoundError, ValueError))



def caption(args) -> str | None:
    """--paper-caption's text (with --note), --note alone, or None."""
    if args.paper_caption:
        return cape_paper.caption(args.axis, args.note)
    return args.note or None


if __name__ == "__main__":
    sys.exit(main())
