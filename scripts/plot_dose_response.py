#!/usr/bin/env python
"""The dose-response figure and table of length on the ladder: the in-context ratio versus the rung,
per PE (seeds pooled, crossed 95 % CI: recordings x seeds), one panel per join variant (asr_pe/plots/dose_response.py).

    python scripts/plot_dose_response.py --runs runs/synth_study/*_ctc_s* --ladder <ladder dir or composition> \\
        [--pool test] [--suffix ""] --out recipes/synth/study/ladder

Writes <out>/dose_response_<pool><suffix>.png and .md. The runs must have been decoded on the
pool's sets (scripts/evaluate_ladder.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from asr_pe.data.synth.ladder import ladder_sets
from asr_pe.evaluation.in_context import InContextError
from asr_pe.io import atomic_write_text
from asr_pe.plots.dose_response import dose_response_markdown, ladder_series, plot_dose_response
from asr_pe.plots.wer_vs_length import RunDirError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run directories or folders holding them")
    parser.add_argument("--ladder", required=True, help="the ladder folder (python -m asr_pe.data.synth.ladder), or "
                        "its composition file (... --composition <file>: what each recording is made of, no audio)")
    parser.add_argument("--pool", default="test", choices=("test", "dev"))
    parser.add_argument("--suffix", default="", help="an inference setting's result suffix (eval/<set><suffix>)")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        series = ladder_series(args.runs, ladder_sets(args.ladder), pool=args.pool, suffix=args.suffix,
                               n_boot=args.n_boot)
    except (RunDirError, FileNotFoundError, InContextError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"dose_response_{args.pool}{args.suffix}"
    plot_dose_response(series, stem.with_suffix(".png"))
    atomic_write_text(stem.with_suffix(".md"), dose_response_markdown(series))
    print(stem.with_suffix(".png"))
    print(stem.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
