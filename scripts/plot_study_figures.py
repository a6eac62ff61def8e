#!/usr/bin/env python
"""Study figures: CER versus length faceted by PE family (or encoder, or study arm) with the
long/short ratio panel, and one figure per PE of its remedies.

    python scripts/plot_study_figures.py --runs recipes/synth/study/runs/*_ctc_s* --out figures/ \\
        [--metric cer|wer] [--facet family|encoder|arm] [--short test] [--long longform] [--ref 2-4] \\
        [--remedies-for rope sinusoidal] [--remedy-runs recipes/synth/study/runs/rope_ctc_s0 ...] \\
        [--parts recipes/synth/study/longform/parts.json]

Writes <out>/<metric>_by_<facet>.png and, per PE of --remedies-for, <out>/remedies_<pe>_<metric>.png
(from --remedy-runs, default --runs). The ratio panel is the in-context ratio (the long recordings
decoded whole over the same utterances decoded alone) where the long set's parts are known
(--parts, or the manifest each run's evaluation names). See asr_pe/plots/length_figures.py.
"""

from __future__ import annotations

import argparse
import logging
import sys

from asr_pe.plots.length_figures import make_study_figures
from asr_pe.plots.wer_vs_length import METRICS, RunDirError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run directories or folders holding them")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--metric", choices=METRICS, default="cer")
    parser.add_argument("--facet", choices=("family", "encoder", "arm"), default="family")
    parser.add_argument("--short", default="test", help="the short test set (eval/<name>)")
    parser.add_argument("--long", default="longform", help="the long-form test set (eval/<name>)")
    parser.add_argument("--ref", default="2-4", help="bucket of the short set the ratio panel divides by")
    parser.add_argument("--parts", default=None,
                        help="the long set's parts (a long-form manifest with parts, or a JSON id -> parts)")
    parser.add_argument("--remedies-for", nargs="*", default=[], metavar="PE",
                        help="write a remedy figure for each of these PEs (run_info.json 'pe')")
    parser.add_argument("--remedy-runs", nargs="+", default=None,
                        help="runs for the remedy figures (default: --runs)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        files = make_study_figures(args.runs, args.out, metric=args.metric, facet=args.facet,
                                   remedies_for=args.remedies_for, remedy_paths=args.remedy_runs,
                                   short_set=args.short, long_set=args.long, ref_bucket=args.ref,
                                   parts_path=args.parts)
    except (RunDirError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in files:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
