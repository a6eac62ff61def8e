#!/usr/bin/env python
"""The study's figure for a corpus: WER (or CER) versus input length per PE, one panel per test set.

    python scripts/plot_corpus_figure.py exp/librispeech/runs/* --out exp/librispeech/plots/wer_vs_length_all.png \\
        [--test-sets test-clean test-clean_long ...] [--metric wer|cer] [--title TEXT]

Each path is a run dir or a folder searched for runs (run_info.json); other systems scored with
score.py plot beside them. Without --test-sets every set of the runs gets a panel. Writes the PNG
and a CSV of every plotted point beside it; see asr_pe/plots/corpus_figure.py.
"""

from __future__ import annotations

import argparse
import logging
import sys

from asr_pe.plots.corpus_figure import plot_corpus_figure
from asr_pe.plots.wer_vs_length import METRICS, RunDirError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or folders holding them")
    parser.add_argument("--out", required=True, help="the PNG to write (a .csv goes beside it)")
    parser.add_argument("--test-sets", nargs="*", default=None, help="panels in order (default: every set)")
    parser.add_argument("--metric", choices=METRICS, default="wer")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        files = plot_corpus_figure(args.paths, args.out, test_sets=args.test_sets, metric=args.metric,
                                   title=args.title)
    except (RunDirError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for kind, path in files.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
