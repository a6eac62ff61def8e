#!/usr/bin/env python
"""Diagnostic plots of one positional encoding (PNG, matplotlib Agg).

    python scripts/plot_pe.py pe=<name> [out=<dir>] [T=200] [d_model=144] [n_heads=4]
        [frame_shift_s=0.04] [seed=0] [draws=5] [<pe option>=<value> …]

``pe`` is a registered name (``rope``), a combination (``cape+rope``) or the name of a
``conf/pe/<name>.yaml`` file (its options are used, e.g. ``pe=sinusoidal_sqrtd``). Any
other ``key=value`` is an option of the PE (values parsed as Python/YAML literals:
``max_distance=64``, ``causal=true``). Parameters are the initial ones (seed ``seed``).
Writes into ``out`` (default ``plots/pe/<pe>``) and prints the paths; see
asr_pe/plots/pe_diagnostics.py for what each figure shows.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asr_pe.models.positional import UnknownPEError, available_pes  # noqa: E402
from asr_pe.plots.pe_diagnostics import DiagnosticsError, plot_pe  # noqa: E402

INT_KEYS = {"T": "T", "d_model": "d_model", "n_heads": "n_heads", "seed": "seed", "draws": "n_draws"}
LITERALS = {"true": True, "false": False, "null": None, "none": None}


def parse_value(text: str):
    if text.lower() in LITERALS:
        return LITERALS[text.lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_args(argv: list[str]) -> dict:
    args: dict = {"options": {}}
    for item in argv:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"arguments are key=value, got {item!r}")
        if key == "pe":
            args["pe"] = value
        elif key == "out":
            args["out"] = value
        elif key in INT_KEYS:
            try:
                args[INT_KEYS[key]] = int(value)
            except ValueError:
                raise ValueError(f"{key} must be an integer, got {value!r}") from None
        elif key == "frame_shift_s":
            args["frame_shift_s"] = float(value)
        else:
            args["options"][key] = parse_value(value)
    if "pe" not in args:
        raise ValueError("missing pe=<name>")
    return args


def resolve_spec(name: str):
    """A conf/pe YAML of that name (its defaults and label), else the name itself."""
    path = ROOT / "conf" / "pe" / f"{name}.yaml"
    if "+" not in name and path.is_file():
        import yaml

        spec = yaml.safe_load(path.read_text()) or {}
        if not isinstance(spec, dict):
            raise ValueError(f"{path}: expected a mapping")
        return spec
    return name


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
    except ValueError as e:
        print(f"plot_pe: {e}\n{__doc__}", file=sys.stderr)
        return 2
    name = args.pop("pe")
    out = args.pop("out", str(Path("plots") / "pe" / name))
    options = args.pop("options")
    if name == "rem" and "rem" not in available_pes()["attention"]:
        print("plot_pe: pe 'rem' is not registered: asr_pe/models/positional/rem.py is missing, so there "
              "are no REM kernels to draw", file=sys.stderr)
        return 1
    try:
        spec = resolve_spec(name)
        if isinstance(spec, dict) and options:
            stage = "input" if spec.get("input") and not spec.get("attention") else "attention"
            if not spec.get(stage):
                raise UnknownPEError(f"pe {name!r} takes no options, got {sorted(options)}")
            spec[stage] = {**spec[stage], **options}
            options = {}
        paths = plot_pe(spec, out, **args, **options)
    except (UnknownPEError, DiagnosticsError, ValueError) as e:
        print(f"plot_pe: {e}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
