#!/usr/bin/env python
"""Summary tables of a length study (accuracy per bucket with seeds; attention versus length;
per-bucket CER with CIs of each decoding).

    python scripts/study_summary.py recipes/synth/study/runs/*_ctc_s* [--short test] [--long longform] \\
        [--parts recipes/synth/study/longform/parts.json] \\
        [--buckets 0-2 2-4 32-64] [--ref 2-4] [--attention-buckets 2-4 32-64 128-256] [--attention-names ...] \\
        [--decodings test [test_joint ...]] [--decodings-long longform] [--remedies] [--compare-to none] [--out FILE.md]
    python scripts/study_summary.py recipes/synth/study/runs/*_hybrid_s* --short test_ctc --long longform_ctc \\
        --decodings test test_joint test_ctc --decodings-long longform_ctc      # the seq2seq study's tables

Arguments are run dirs or folders searched for them (as for plot_wer_vs_length.py). Prints the
markdown tables (see asr_pe/plots/study_summary.py); --out also writes them to a file. The first
table leads with the in-context ratio (the long recordings decoded whole over the same utterances
decoded alone; scripts/in_context_table.py gives it in full).
"""

from __future__ import annotations

import argparse
import logging
import sys

from asr_pe.io import atomic_write_text
from asr_pe.plots.study_summary import (
    accuracy_table, attention_table, decodings_table, difference_table, remedy_table,
)
from asr_pe.plots.wer_vs_length import RunDirError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or folders holding them")
    parser.add_argument("--short", default="test", help="the short test set (eval/<name>)")
    parser.add_argument("--long", default="longform", help="the long-form test set (eval/<name>)")
    parser.add_argument("--parts", default=None,
                        help="the long set's parts (a long-form manifest with parts, or a JSON id -> parts), "
                             "for the leading in-context column and the cross-set ratio's CI; default: the "
                             "manifest each run's eval/<long>/buckets.meta.json names")
    parser.add_argument("--buckets", nargs="+", default=["0-2", "2-4", "32-64"],
                        help="buckets of the short set to show; the last is the ratio's numerator")
    parser.add_argument("--ref", default="2-4", help="reference bucket (inside the training lengths)")
    parser.add_argument("--attention-buckets", nargs="+", default=["2-4", "32-64", "128-256"])
    parser.add_argument("--attention-names", nargs="+", default=None,
                        help="column names of the attention buckets (default: '<bucket> s')")
    parser.add_argument("--decodings", nargs="+", default=None, metavar="SET",
                        help="add the per-bucket CER [CI] table of these eval sets (one row per PE and decoding)")
    parser.add_argument("--decodings-long", default=None, metavar="SET",
                        help="the long-form set whose CER follows each decoding's row (the same label)")
    parser.add_argument("--remedies", action="store_true",
                        help="add the remedy table: per PE and remedy (eval/<short>_<remedy>, chunked, training "
                             "remedies), CER [CI] at --ref, the last of --buckets and long-form, ratio and cost")
    parser.add_argument("--compare-to", default=None, metavar="PE",
                        help="add the table of CER differences to this PE's runs of the same head, encoder "
                             "and arm, at --ref and on --long, with paired bootstrap CIs")
    parser.add_argument("--out", default=None, help="also write the tables to this markdown file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        text = accuracy_table(args.paths, short_set=args.short, long_set=args.long,
                              buckets=args.buckets, ref_bucket=args.ref, parts_path=args.parts)
        try:
            text += "\n" + attention_table(args.paths, buckets=args.attention_buckets,
                                           bucket_names=args.attention_names)
        except FileNotFoundError as e:
            logging.warning("no attention table: %s", e)
        if args.remedies:
            text += "\n" + remedy_table(args.paths, short_set=args.short, long_set=args.long,
                                         buckets=[args.ref, args.buckets[-1]], ref_bucket=args.ref)
        if args.compare_to:
            text += "\n" + difference_table(args.paths, reference_pe=args.compare_to, short_set=args.short,
                                             long_set=args.long, ref_bucket=args.ref)
        if args.decodings:
            text += "\n" + decodings_table(args.paths, sets=args.decodings, long_set=args.decodings_long)
    except (RunDirError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.out:
        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
