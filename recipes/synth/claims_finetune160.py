"""Every number of recipes/synth/study/finetune160/README.md (issue 48 point 4: the RoPE controls
fine-tuned to 160 s), computed from the archived runs in study/finetune160/ with backlog.py's own
dev choice (`choose`: CER pooled over the dev ladder's two 160 s rungs, Σ char errors / Σ reference
chars). Same machinery as recipes/synth/claims.py, which adds `FINETUNE160_DOCUMENTS` to its DOCUMENTS.
"""

from __future__ import annotations

import runpy
from functools import lru_cache
from pathlib import Path

from asr_pe.plots.results_claims import Claim, Fact

STUDY = Path(__file__).resolve().parent / "study"
README = STUDY / "finetune160" / "README.md"
DEV_SETS = ["ladder_dev_gap500ms_160", "ladder_dev_nogap_160"]
# the plain fine-tune's grid at seed 2, in the README's order: (lr, steps)
PLAIN_GRID = (("3e-4", 100), ("3e-4", 300), ("1e-3", 100), ("1e-3", 300))


@lru_cache(maxsize=None)
def _choose(candidates: tuple[str, ...]) -> dict:
    backlog = runpy.run_path(str(STUDY / "backlog.py"), run_name="claims")
    return backlog["choose"](STUDY / "finetune160", list(candidates), DEV_SETS)


def plain_choice() -> dict:
    return _choose(tuple(f"rope_ft160_lr{lr}_st{steps}_ctc_s2" for lr, steps in PLAIN_GRID))


def pi_choice() -> dict:
    return _choose(tuple(f"rope_pi_ft160_lr{lr}_st{steps}_ctc_s2" for lr, steps in PLAIN_GRID))


def _pi_over_plain() -> list[float]:
    """PI's dev CER over the plain fine-tune's, cell by cell of the grid."""
    return [pi / plain for pi, plain in zip(pi_choice()["dev_cer"].values(), plain_choice()["dev_cer"].values())]


def _source_digests() -> dict[str, str]:
    """Each archived fine-tune of seed 2's source -> the sha256 of the checkpoint it started from."""
    from asr_pe.results_table import read_table, table_of

    out = {}
    for run, rows in read_table(table_of(STUDY / "finetune160")).items():
        init = next(r["data"] for r in rows if r["path"] == "run_info.json").get("init_from") or {}
        if str(init.get("run", "")).endswith("/source_rope_ctc_s2"):
            out[run] = init["sha256"]
    return out


FINETUNE160_CLAIMS = [
    Claim("plain fine-tune, seed 2: dev CER of the grid",
          "5.58 % with lr 3e-4 and 100 steps, {} % with 3e-4 and 300, {} % with 1e-3 and 100, and\n{} % with 1e-3 and 300",
          lambda d: list(plain_choice()["dev_cer"].values())[1:]),
    Claim("plain fine-tune, seed 2: the first cell", "(pooled over the 20 recordings of the two 160 s dev rungs):\n{} % with",
          lambda d: list(plain_choice()["dev_cer"].values())[:1]),
    Fact("plain fine-tune, seed 2: the lowest at the grid's corner", "The lowest is the grid's corner, the higher lr with the\nmore steps",
         lambda d: [] if plain_choice()["chosen"] == "rope_ft160_lr1e-3_st300_ctc_s2" else [plain_choice()["chosen"]]),
    Fact("plain fine-tune, seed 2: more steps lower at either lr", "more steps gave the lower dev CER at either lr",
         lambda d: [f"lr {lr}" for lr in ("3e-4", "1e-3")
                    if not plain_choice()["dev_cer"][f"rope_ft160_lr{lr}_st300_ctc_s2"]
                    < plain_choice()["dev_cer"][f"rope_ft160_lr{lr}_st100_ctc_s2"]]),
]
FINETUNE160_CLAIMS += [
    Claim("PI, seed 2: dev CER of the grid", "Their dev CER, in the same order: {} %, {} %,\n{} % and {} %",
          lambda d: list(pi_choice()["dev_cer"].values())),
    Fact("PI, seed 2: the lowest at the grid's corner", "The lowest is again the grid's corner (lr 1e-3, 300 steps)",
         lambda d: [] if pi_choice()["chosen"] == "rope_pi_ft160_lr1e-3_st300_ctc_s2" else [pi_choice()["chosen"]]),
    Claim("PI over plain, cell by cell", "each cell is\n{}-{}× the plain fine-tune's cell of the same lr and steps",
          lambda d: [min(_pi_over_plain()), max(_pi_over_plain())]),
    Fact("every fine-tune of seed 2 from one source", "Every archived fine-tune of seed 2 started from one source checkpoint",
         lambda d: [] if len(set(_source_digests().values())) == 1 and len(_source_digests()) >= 8
         else [f"digests {sorted(set(_source_digests().values()))} over {len(_source_digests())} runs"]),
    Fact("the source's digest", "`best.ckpt` with sha256\n81cdec975abae859…",
         lambda d: [] if all(v.startswith("81cdec975abae859") for v in _source_digests().values())
         else sorted(set(_source_digests().values()))),
]
FINETUNE160_DOCUMENTS = {README: FINETUNE160_CLAIMS}
