#!/usr/bin/env python
"""Evaluate a trained run on the synthetic length ladder; choose inference settings on its dev pool.

    python scripts/evaluate_ladder.py --run runs/synth_study/rope_ctc_s0 [--ladder DIR] \\
        [--candidates window:2.5 window:5 window:10 rope_ntk rope_ntk@10 rope_yarn chunked:20:4] \\
        [--select-variant nogap] [--select-min-rung 10] [--device cpu] [--n-boot 1000]

Without --ladder the default ladder is built (or reused) in the cache (python -m
asr_pe.data.synth.ladder). Writes <run>/eval/<ladder set>[<suffix>]/ for every set decoded and
<run>/eval/ladder/{report.md,choice.json} (asr_pe/evaluation/ladder.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="the trained run directory")
    parser.add_argument("--ladder", default=None, help="a built ladder folder (default: build or reuse the default)")
    parser.add_argument("--candidates", nargs="*", default=[],
                        help="inference settings to choose from on dev: eval.remedy strings, <remedy>@<training length s> "
                             "(the length the RoPE rescalings' factor divides by), or chunked:<chunk_s>:<overlap_s>")
    parser.add_argument("--select-variant", default="nogap", help="the join variant the choice is made on")
    parser.add_argument("--select-min-rung", type=float, default=0.0, help="only rungs at least this long count")
    parser.add_argument("--device", default=None, help="auto | cpu | cuda[:N] (default: the run's eval.device)")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--checkpoint", default=None, help="best | last (default: the run's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not (Path(args.run) / "config.yaml").is_file():     # before the heavy imports: a typo fails fast
        print(f"error: {args.run}: not a run directory (no config.yaml)", file=sys.stderr)
        return 2
    from asr_pe.data.synth.ladder import LadderError, build_ladder
    from asr_pe.evaluation.ladder import evaluate_ladder
    from asr_pe.evaluation.settings import EvalSettingsError
    from asr_pe.training.cli import friendly_errors
    from asr_pe.training.data import resolve_manifests
    with friendly_errors():
        try:
            ladder = args.ladder or build_ladder()
            choice = evaluate_ladder(args.run, ladder, corpus_manifests=resolve_manifests, candidates=args.candidates,
                                     select_variant=args.select_variant, select_min_rung=args.select_min_rung,
                                     device=args.device, n_boot=args.n_boot, checkpoint=args.checkpoint)
        except (EvalSettingsError, LadderError, KeyError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    print(f"chosen on dev: {choice['chosen']}; report: {Path(args.run) / 'eval' / 'ladder' / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
