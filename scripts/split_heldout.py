#!/usr/bin/env python
"""Split a manifest into a training share and a held-out share of whole groups (chapters, talks).

    python scripts/split_heldout.py --manifest exp/librispeech_smoke/manifests/dev-clean.jsonl \\
        --fit-out .../dev-clean_fit.jsonl --heldout-out .../dev-clean_heldout.jsonl \\
        [--fraction 0.1] [--group-key speaker]

The recipes' smoke runs train on one corpus part; this gives them a validation set the model has not
heard (asr_pe/data/heldout.py says which groups are held out and why whole groups).
"""

from __future__ import annotations

import argparse
import sys

from asr_pe.data.heldout import HeldoutError, split_heldout
from asr_pe.data.manifest import ManifestError, read_manifest, write_manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", required=True, help="the manifest to split (.jsonl)")
    p.add_argument("--fit-out", required=True, help="the training share to write (.jsonl)")
    p.add_argument("--heldout-out", required=True, help="the held-out share to write (.jsonl)")
    p.add_argument("--fraction", type=float, default=0.1, help="share of the groups held out (default 0.1)")
    p.add_argument("--group-key", default="speaker", help="manifest field naming an utterance's group")
    args = p.parse_args(argv)
    try:
        utts = read_manifest(args.manifest)
        fit, held, groups = split_heldout(utts, args.fraction, group_key=args.group_key)
    except (HeldoutError, ManifestError, FileNotFoundError) as e:
        print(f"error: {args.manifest}: {e}", file=sys.stderr)
        return 2
    # the held-out share first: a kill between the two writes leaves no training share, which the
    # recipe reads as "not split yet"
    write_manifest(args.heldout_out, held)
    write_manifest(args.fit_out, fit)
    hours = sum(u.duration for u in held) / 3600
    shown = ", ".join(groups[:5]) + (" ..." if len(groups) > 5 else "")
    print(f"{args.manifest}: held out {len(groups)} of {len({getattr(u, args.group_key) for u in utts})} groups "
          f"({len(held)} utterances, {hours:.2f} h: {shown}) -> {args.heldout_out}; "
          f"{len(fit)} utterances to train on -> {args.fit_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
