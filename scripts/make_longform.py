#!/usr/bin/env python
"""Build a long-form test set from a manifest (consecutive utterances of one speaker/chapter/talk).

Usage (Hydra-style key=value arguments):

    python scripts/make_longform.py in=data/test.jsonl out=data/test_long.jsonl \\
        durations=[10,20,40,80,160] [gap_s=0.5] [tolerance=0.15] [max_per_duration=null] \\
        [allow_mixed_speakers=false] [group_key=speaker] [seed=0] [sample_rate=16000] \\
        [audio_dir=<out without .jsonl>] [strict=true]

``durations`` may include ``full`` (one recording per whole group). The ``gap_s`` seconds
between joined utterances hold their own background: exact zeros where the sources' pauses are
digital silence (synthetic or gated audio), otherwise noise matched to the sources' noise floor
(spectrum and level of their quietest frames), seeded by ``seed`` and the recording id; the
summary counts both kinds and gives the floor levels (asr_pe/data/longform_sets.py explains why).
Audio goes next to the output manifest, in a folder named after it (``data/test_long/``)
unless ``audio_dir`` is given. A tiny parser rather than ``@hydra.main``: this is a one-shot
data tool, it should neither change the working directory nor write ``outputs/`` folders.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asr_pe.data.longform_sets import LongformError, build_longform  # noqa: E402
from asr_pe.data.manifest import ManifestError, read_manifest  # noqa: E402

DEFAULTS = {
    "in": None, "out": None, "durations": [10, 20, 40, 80, 160], "gap_s": 0.5, "tolerance": 0.15,
    "max_per_duration": None, "allow_mixed_speakers": False, "group_key": "speaker", "seed": 0,
    "sample_rate": 16000, "audio_dir": None, "strict": True,
}


def parse_args(argv: list[str]) -> dict:
    """``key=value`` pairs; values are parsed as YAML (``[10,20]``, ``true``, ``null``, numbers)."""
    cfg = dict(DEFAULTS)
    for arg in argv:
        if arg in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        key, sep, value = arg.partition("=")
        key = key.lstrip("+")
        if not sep or key not in DEFAULTS:
            raise SystemExit(f"make_longform: bad argument {arg!r}; expected key=value with key in "
                             f"{', '.join(DEFAULTS)}")
        try:
            cfg[key] = yaml.safe_load(value) if key not in ("in", "out", "audio_dir") else value
        except yaml.YAMLError as e:
            raise SystemExit(f"make_longform: cannot parse {arg!r}: {e}") from None
    for key in ("in", "out"):
        if not cfg[key]:
            raise SystemExit(f"make_longform: {key}=<manifest> is required")
    return cfg


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    out = Path(cfg["out"])
    audio_dir = Path(cfg["audio_dir"]) if cfg["audio_dir"] else out.with_suffix("")
    if audio_dir.resolve() == out.resolve():
        raise SystemExit(f"make_longform: out={out} needs a file suffix (e.g. .jsonl) or pass audio_dir=")
    try:
        utterances = read_manifest(cfg["in"], strict=bool(cfg["strict"]))
        made, report = build_longform(
            utterances, cfg["durations"], audio_dir, gap_s=float(cfg["gap_s"]),
            tolerance=float(cfg["tolerance"]), allow_mixed_speakers=bool(cfg["allow_mixed_speakers"]),
            group_key=cfg["group_key"], sample_rate=int(cfg["sample_rate"]), seed=int(cfg["seed"]),
            max_per_duration=cfg["max_per_duration"], manifest_path=out)
    except (LongformError, ManifestError, FileNotFoundError) as e:
        print(f"make_longform: {cfg['in']}: {e}", file=sys.stderr)
        return 1
    print(f"{len(made)} recordings from {len(utterances)} utterances of {cfg['in']}")
    print(report.summary())
    print(f"manifest: {out}\naudio:    {audio_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
