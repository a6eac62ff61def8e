"""Inference remedies as specs: their names, ``eval.remedy`` parsing, labels and results-folder
suffixes, and which runs they apply to. No torch here, so that a shell recipe can ask
(``python -m asr_pe.inference.remedy_specs suffix <spec>`` / ``applies <spec> <pe>``) instead of
re-implementing the naming; what each remedy does is ``remedies.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from asr_pe.errors import UserError

ROPE_SCALINGS = {"rope_pi": "pi", "rope_ntk": "ntk", "rope_yarn": "yarn"}
REMEDIES = ("window", "logit_scale", *ROPE_SCALINGS)


class RemedyError(UserError, ValueError):
    """A remedy spec that cannot apply; the message names the spec and what to do."""


@dataclass(frozen=True)
class Remedy:
    name: str
    value: float | None = None  # window: W in seconds (None: the training length)

    @property
    def label(self) -> str:
        return self.name if self.value is None else f"{self.name}:{self.value:g}"


def parse_remedies(spec: str | None) -> list[Remedy]:
    """``"rope_yarn+window:10"`` -> [Remedy("rope_yarn"), Remedy("window", 10.0)]; None, "" and
    "none" -> []."""
    if spec is None or str(spec).strip().lower() in ("", "none", "null"):
        return []
    remedies = []
    for part in str(spec).split("+"):
        name, _, value = part.strip().partition(":")
        if name not in REMEDIES:
            raise RemedyError(f"eval.remedy={spec!r}: unknown remedy {name!r}; choose from {list(REMEDIES)}, "
                              "joined by '+' (e.g. rope_yarn+window:10)")
        if value and name != "window":
            raise RemedyError(f"eval.remedy={spec!r}: {name} takes no value (only window:<seconds> does)")
        seconds = None
        if value:
            try:
                seconds = float(value)
            except ValueError:
                raise RemedyError(f"eval.remedy={spec!r}: window:<seconds> needs a number, got {value!r}") from None
            if seconds <= 0:
                raise RemedyError(f"eval.remedy={spec!r}: the window must be > 0 s, got {seconds:g}")
        if any(r.name == name for r in remedies):
            raise RemedyError(f"eval.remedy={spec!r}: {name} given twice")
        remedies.append(Remedy(name, seconds))
    if sum(r.name in ROPE_SCALINGS for r in remedies) > 1:
        raise RemedyError(f"eval.remedy={spec!r}: choose one of {list(ROPE_SCALINGS)}")
    return remedies


def remedy_label(remedies: list[Remedy]) -> str:
    """The canonical spec ("" for none): the ``remedy`` column of result tables."""
    return "+".join(r.label for r in remedies)


def remedy_suffix(remedies: list[Remedy]) -> str:
    """A results-folder suffix for a remedy (eval/<set>_<suffix>): ``_window10``, ``_rope_yarn``."""
    if not remedies:
        return ""
    return "_" + re.sub(r"[^A-Za-z0-9_]+", "", remedy_label(remedies).replace("+", "_").replace(".", "p"))


def applies_to(remedies: list[Remedy], pe: str) -> bool:
    """Whether a run of PE ``pe`` (the name its run_info.json records) takes these remedies: a
    RoPE rescaling needs plain RoPE as the attention stage (``rope``, ``cape+rope``; not a model
    trained rescaled, ``rope_pi``), window and logit_scale apply to any (``check_remedies`` says
    the same of a loaded model)."""
    return not any(r.name in ROPE_SCALINGS for r in remedies) or str(pe).split("+")[-1] == "rope"


def per_utterance(remedies: list[Remedy]) -> bool:
    """Whether the remedies depend on the padded length of a batch (then encode one by one)."""
    return any(r.name in ROPE_SCALINGS for r in remedies)



def main(argv: list[str] | None = None) -> int:
    """For shell recipes, so that they do not re-implement the naming:
    ``python -m asr_pe.inference.remedy_specs suffix <spec>`` prints the results-folder suffix;
    ``python -m asr_pe.inference.remedy_specs applies <spec> <pe>`` prints yes or no."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m asr_pe.inference.remedy_specs",
                                description="The results-folder suffix of an eval.remedy spec, or whether it "
                                            "applies to a run of a PE.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("suffix", help="print the eval/<set><suffix> suffix of a spec").add_argument("spec")
    applies = sub.add_parser("applies", help="print yes or no: does the spec apply to a run of this PE")
    applies.add_argument("spec")
    applies.add_argument("pe", help="the PE name its run_info.json records")
    args = p.parse_args(argv)
    try:
        remedies = parse_remedies(args.spec)
    except RemedyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(remedy_suffix(remedies) if args.command == "suffix" else ("yes" if applies_to(remedies, args.pe) else "no"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
