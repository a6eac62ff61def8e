#!/usr/bin/env python
"""Build a long-form test set from a manifest (consecutive utterances of one speaker/chapter/talk).

    python scripts/make_longform.py --manifest data/test.jsonl --out data/test_long.jsonl \\
        [--durations 10 20 40 80 160] [--gap-s 0.5] [--tolerance 0.15] [--max-per-duration N] \\
        [--allow-mixed-speakers] [--group-key speaker] [--seed 0] [--sample-rate 16000] \\
        [--audio-dir <out without .jsonl>] [--no-strict]

``--durations`` may include ``full`` (one recording per whole group). The ``--gap-s`` seconds
between joined utterances hold their own background: exact zeros where the sources' pauses are
digital silence (synthetic or gated audio), otherwise noise matched to the sources' noise floor
(spectrum and level of their quietest frames), seeded by ``--seed`` and the recording id; the
summary counts both kinds and gives the floor levels (asr_pe/data/longform_sets.py explains why).
Audio goes next to the output manifest, in a folder named after it (``data/test_long/``)
unless ``--audio-dir`` is given.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from asr_pe.data.longform_sets import LongformError, build_longform
from asr_pe.data.manifest import ManifestError, read_manifest


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", required=True, help="the source manifest (.jsonl)")
    p.add_argument("--out", required=True, help="the long-form manifest to write (.jsonl)")
    p.add_argument("--durations", nargs="+", default=["10", "20", "40", "80", "160"],
                   help="target lengths in seconds, or 'full' (default: 10 20 40 80 160)")
    p.add_argument("--gap-s", type=float, default=0.5, help="seconds between joined utterances")
    p.add_argument("--tolerance", type=float, default=0.15, help="a recording lies within D(1 ± tolerance)")
    p.add_argument("--max-per-duration", type=int, default=None, help="cap on recordings per target (seeded)")
    p.add_argument("--allow-mixed-speakers", action="store_true",
                   help="one stream over the whole manifest instead of one per group")
    p.add_argument("--group-key", default="speaker", help="manifest field that groups utterances")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-rate", type=int, default=16000)
    p.add_argument("--audio-dir", default=None, help="default: the output manifest's path without .jsonl")
    p.add_argument("--no-strict", dest="strict", action="store_false",
                   help="skip malformed manifest lines (counted and logged) instead of stopping")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = Path(args.out)
    audio_dir = Path(args.audio_dir) if args.audio_dir else out.with_suffix("")
    if audio_dir.resolve() == out.resolve():
        print(f"error: --out {out} needs a file suffix (e.g. .jsonl), or give --audio-dir", file=sys.stderr)
        return 2
    try:
        utterances = read_manifest(args.manifest, strict=args.strict)
        made, report = build_longform(
            utterances, args.durations, audio_dir, gap_s=args.gap_s, tolerance=args.tolerance,
            allow_mixed_speakers=args.allow_mixed_speakers, group_key=args.group_key,
            sample_rate=args.sample_rate, seed=args.seed, max_per_duration=args.max_per_duration,
            manifest_path=out)
    except (LongformError, ManifestError, FileNotFoundError) as e:
        print(f"error: {args.manifest}: {e}", file=sys.stderr)
        return 2
    print(f"{len(made)} recordings from {len(utterances)} utterances of {args.manifest}")
    print(report.summary())
    print(f"manifest: {out}\naudio:    {audio_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
