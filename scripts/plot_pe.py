#!/usr/bin/env python
"""Diagnostic plots of one positional encoding (PNG, matplotlib Agg).

    python scripts/plot_pe.py <pe> [--out DIR] [--length 200] [--d-model 144] [--n-heads 4]
        [--frame-shift-s 0.04] [--seed 0] [--draws 5] [--option KEY=VALUE ...]

``pe`` is a registered name (``rope``), a combination (``cape+rope``) or the name of a
``conf/pe/<name>.yaml`` file (its options are used, e.g. ``sinusoidal_sqrtd``). ``--option``
sets an option of the PE (values parsed as Python/YAML literals: ``--option max_distance=64
--option causal=true``). Parameters are the initial ones (seed ``--seed``). Writes into
``--out`` (default ``plots/pe/<pe>``) and prints the paths; see asr_pe/plots/pe_diagnostics.py
for what each figure shows.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from asr_pe.models.positional import UnknownPEError, available_pes
from asr_pe.plots.pe_diagnostics import DiagnosticsError, plot_pe

ROOT = Path(__file__).resolve().parents[1]  # conf/pe/ of this checkout
LITERALS = {"true": True, "false": False, "null": None, "none": None}


def parse_value(text: str):
    if text.lower() in LITERALS:
        return LITERALS[text.lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def pe_option(text: str) -> tuple[str, object]:
    """``--option KEY=VALUE``: one option of the PE, its value a literal."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, parse_value(value)


def parse_args(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pe", help="a registered PE, a combination (cape+rope) or a conf/pe/<name>.yaml name")
    p.add_argument("--out", default=None, help="output folder (default plots/pe/<pe>)")
    p.add_argument("--length", dest="T", type=int, default=None, help="positions drawn (default 200)")
    p.add_argument("--d-model", type=int, default=None, help="model width (default 144)")
    p.add_argument("--n-heads", type=int, default=None, help="attention heads (default 4)")
    p.add_argument("--frame-shift-s", type=float, default=None, help="seconds per position (default 0.04)")
    p.add_argument("--seed", type=int, default=None, help="initial parameters' seed (default 0)")
    p.add_argument("--draws", dest="n_draws", type=int, default=None, help="random draws shown (default 5)")
    p.add_argument("--option", type=pe_option, action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the PE (repeatable)")
    args = {k: v for k, v in vars(p.parse_args(argv)).items() if v is not None}
    args["options"] = dict(args.pop("option"))
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
    args = parse_args(argv)
    name = args.pop("pe")
    out = args.pop("out", str(Path("plots") / "pe" / name))
    options = args.pop("options")
    if name == "rem" and "rem" not in available_pes()["attention"]:
        print("error: pe 'rem' is not registered: asr_pe/models/positional/rem.py is missing, so there "
              "are no REM kernels to draw", file=sys.stderr)
        return 2
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
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
