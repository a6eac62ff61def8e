"""Build the synthetic corpus from the command line and print its manifests and statistics.

    python -m asr_pe.data.synth --root /tmp/synth --num-train 200 --workers 2
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import fields
from pathlib import Path

from asr_pe.data.synth.corpus import (SPLITS, SynthConfig, bucket_counts, build_synth_corpus,
                                      build_synth_longform, manifest_paths)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m asr_pe.data.synth",
                                description=__doc__.split("\n")[0])
    p.add_argument("--root", default=None,
                   help="cache root (default $ASR_PE_CACHE or ~/.cache/asr_pe); the corpus goes "
                        "to <root>/synth/<config hash>")
    p.add_argument("--workers", type=int, default=2, help="synthesis processes (default 2)")
    p.add_argument("--no-progress", action="store_true", help="log lines instead of a progress bar")
    p.add_argument("--longform", type=float, nargs="+", default=None, metavar="SECONDS",
                   help="also build long-form recordings of these durations from the test split")
    defaults = SynthConfig()
    for f in fields(SynthConfig):
        flag = "--" + f.name.replace("_", "-")
        value = getattr(defaults, f.name)
        if isinstance(value, tuple):
            p.add_argument(flag, type=float, nargs="+", default=None,
                           help=f"(default {' '.join(f'{v:g}' for v in value)})")
        else:
            p.add_argument(flag, type=type(value), default=None, help=f"(default {value})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = {f.name: getattr(args, f.name) for f in fields(SynthConfig)
              if getattr(args, f.name) is not None}
    try:
        cfg = SynthConfig(**config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.monotonic()
    corpus_dir = build_synth_corpus(args.root, workers=args.workers,
                                    progress=False if args.no_progress else None, **config)
    elapsed = time.monotonic() - start
    print(f"corpus: {corpus_dir}  ({elapsed:.1f} s)")
    for split, path in manifest_paths(corpus_dir).items():
        durations = [json.loads(line)["duration"] for line in Path(path).read_text().splitlines()]
        total = sum(durations)
        print(f"{split:5s} {path}: {len(durations)} utterances, {total / 3600:.2f} h, "
              f"duration min {min(durations, default=0):.2f} / mean "
              f"{total / max(1, len(durations)):.2f} / max {max(durations, default=0):.2f} s")
        if split == "test":
            edges = cfg.test_bucket_edges
            counts = bucket_counts(durations, edges)
            print("      buckets: " + ", ".join(
                f"[{a:g},{b:g}) {n}" for a, b, n in zip(edges, edges[1:], counts)))
    assert set(SPLITS) == set(manifest_paths(corpus_dir))
    if args.longform:
        lf = build_synth_longform(corpus_dir, durations=args.longform)
        lf_durations = [json.loads(line)["duration"] for line in lf.read_text().splitlines()]
        print(f"long  {lf}: {len(lf_durations)} recordings, "
              f"{min(lf_durations, default=0):.1f}-{max(lf_durations, default=0):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
