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
FINETUNE160_DOCUMENTS = {README: FINETUNE160_CLAIMS}
