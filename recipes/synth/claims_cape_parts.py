"""Every number of recipes/synth/study/cape_parts/README.md (issue 45 point 4: what each part of
CAPE does), computed from the archived runs: the arms in study/cape_parts/<arm>/, full CAPE,
`none` and sinusoidal of seed 4 in study/ladder/seed4/ (length) and study/rate/ (tempo).

Same machinery as recipes/synth/claims.py, which adds `CAPE_PARTS_DOCUMENTS` to its DOCUMENTS and
passes its `StudyData`: the length ladder's cells and paired differences come from
`StudyData.ladder` / `StudyData.ladder_difference` (recordings resampled), the tempo ratios and
their paired differences from claims_rate.py's readers (utterances resampled). One seed per
model in the seed-4 tables (every CI over the test audio for that model); the length ladder and the
tempo ladder also pooled over seeds 3 and 4 (crossed CIs: recordings or utterances resampled once for
both seeds, and the seeds; paired differences resample them once for every seed of both models, the
seeds fixed). The baselines' seed 3 on the tempo ladder: the rate study's retrains (study/rate/seed3/).
"""

from __future__ import annotations

import json
import runpy
from functools import lru_cache
from pathlib import Path

from asr_pe.plots.rate_ladder import rate_ladder
from asr_pe.plots.results_claims import Claim, Fact, paired_ratio_difference

STUDY = Path(__file__).resolve().parent / "study"
README = STUDY / "cape_parts" / "README.md"
ARMS = ("cape_shift_only", "cape_scale_only", "cape_local_only", "cape_shift60")
ROWS = ("cape", "cape_shift_only", "cape_scale_only", "cape_local_only", "cape_shift60", "none", "sinusoidal")
NAME = {"cape": "full CAPE", "cape_shift_only": "global shift only", "cape_scale_only": "global scaling only",
        "cape_local_only": "local shift only", "cape_shift60": "60 s global shift", "none": "`none`",
        "sinusoidal": "sinusoidal"}
RUNGS = (5, 10, 20, 40, 80, 160)
GAP = "gap500ms"
SHORT = "ladder_test_alone"
TEMPI = (0.8, 0.9, 1.1, 1.2, 1.3)
_RATE = runpy.run_path(str(Path(__file__).resolve().parent / "claims_rate.py"))


def ladder_run(model: str) -> Path:
    """The run whose length-ladder decodings are archived for ``model`` (an arm or a baseline)."""
    return STUDY / "cape_parts" / model / "cape_ctc_s4" if model in ARMS else STUDY / "ladder" / "seed4" / f"{model}_ctc_s4"


def rate_run(model: str) -> Path:
    """The run whose tempo decodings of the short pool are archived for ``model``."""
    return STUDY / "cape_parts" / model / "cape_ctc_s4" if model in ARMS else STUDY / "rate" / f"{model}_ctc_s4"


def cell(d, model, rung=160):
    return d.ladder((str(ladder_run(model)),), GAP, rung)


SEEDS = (3, 4)  # the arms' seeds; the baselines' seed 3 is the ladder study's (study/ladder/)


def ladder_runs(model: str) -> tuple[str, ...]:
    """``model``'s runs of seeds 3 and 4 with length-ladder decodings."""
    return tuple(str(STUDY / "cape_parts" / model / f"cape_ctc_s{s}" if model in ARMS else
                     STUDY / "ladder" / ("seed4" if s == 4 else "") / f"{model}_ctc_s{s}") for s in SEEDS)


def cell34(d, model, rung=160):
    """Pooled over seeds 3 and 4: the crossed CI resamples the recordings once for both seeds, and the seeds."""
    return d.ladder(ladder_runs(model), GAP, rung)


def vs_cape34(d, model) -> list[float]:
    return list(d.ladder_difference(ladder_runs(model), ladder_runs("cape"), GAP, 160))


def _length_table34(d) -> list[float]:
    return [v for m in ROWS for c in [cell34(d, m)] for v in
            [*[cell34(d, m, r).ratio for r in RUNGS], c.ci_low, c.ci_high, c.alone]]


def vs_cape(d, model) -> list[float]:
    """``model``'s 160 s ratio minus full CAPE's, paired over the recordings, with its CI."""
    return list(d.ladder_difference((str(ladder_run(model)),), (str(ladder_run("cape")),), GAP, 160))


@lru_cache(maxsize=None)
def tempo_ratios(model: str) -> dict[float, float]:
    """CER at each tempo of the short pool over the CER as recorded."""
    (lad,) = rate_ladder([str(rate_run(model))], SHORT, axis="tempo", n_boot=10)  # point ratios only
    return {v: r.ratio for v, r in lad.rungs["cer"].items()}


def tempo_vs(model: str, other: str, tempo: float) -> list[float]:
    """``model``'s tempo ratio minus ``other``'s, CER, paired over the utterances, with its CI."""
    return list(_RATE["ratio_difference"](rate_run(model), rate_run(other), SHORT, "tempo", tempo, "cer"))


def rate_runs(model: str) -> tuple[Path, ...]:
    """``model``'s runs of seeds 3 and 4 with tempo decodings of the short pool (the baselines' seed 3:
    the rate study's retrains, study/rate/seed3/)."""
    return tuple(STUDY / "cape_parts" / model / f"cape_ctc_s{s}" if model in ARMS else
                 STUDY / "rate" / ("" if s == 4 else f"seed{s}") / f"{model}_ctc_s{s}" for s in SEEDS)


@lru_cache(maxsize=None)
def tempo_cells34(model: str) -> dict:
    """Pooled over seeds 3 and 4: tempo -> the CER ratio's `RungResult` (crossed CI: the utterances
    resampled once for both seeds, and the seeds)."""
    (lad,) = rate_ladder([str(r) for r in rate_runs(model)], SHORT, axis="tempo", n_boot=_RATE["N_BOOT"])
    return lad.rungs["cer"]


def tempo_vs34(model: str, other: str, tempo: float) -> list[float]:
    """``model``'s tempo ratio minus ``other``'s over seeds 3 and 4, CER, paired over the utterances
    (resampled once for every seed of both; the seeds fixed), with its CI."""
    def results(m):
        return [_RATE["_in_context"](r, SHORT, "tempo", tempo) for r in rate_runs(m)]
    return list(paired_ratio_difference(results(model), results(other), metric="cer", n_boot=_RATE["N_BOOT"]))


def _tempo_table34(d) -> list[float]:
    return [v for m in ROWS for c in [tempo_cells34(m)] for v in
            [*[c[t].ratio for t in TEMPI], c[1.3].ratio_ci_low, c[1.3].ratio_ci_high]]


HOPS = (8, 9, 11, 12)  # the hop ladder of `test` (ms); the runs' own hop, 10 ms, is the plain rung


def hop_runs(model: str) -> tuple[Path, ...]:
    """``model``'s runs of seeds 3 and 4 with hop decodings of `test`: the arms' retrains of stage 6
    (study/cape_parts/hop/<arm>/), the baselines' in the rate study (study/rate/, study/rate/seed3/)."""
    return tuple(STUDY / "cape_parts" / "hop" / model / f"cape_ctc_s{s}" if model in ARMS else
                 STUDY / "rate" / ("" if s == 4 else f"seed{s}") / f"{model}_ctc_s{s}" for s in SEEDS)


@lru_cache(maxsize=None)
def hop_cells34(model: str, metric: str = "cer") -> dict:
    """Pooled over seeds 3 and 4: hop (ms) -> the error ratio's `RungResult` on `test` (crossed CI)."""
    (lad,) = rate_ladder([str(r) for r in hop_runs(model)], "test", axis="hop_ms", n_boot=_RATE["N_BOOT"])
    return lad.rungs[metric]


@lru_cache(maxsize=None)
def hop_vs34(model: str, other: str, hop: float, metric: str = "cer") -> tuple[float, float, float]:
    """``model``'s ratio at ``hop`` ms minus ``other``'s over seeds 3 and 4 on `test`, paired over the
    utterances (resampled once for every seed of both; the seeds fixed), with its CI."""
    def results(m):
        return [_RATE["_in_context"](r, "test", "hop_ms", float(hop)) for r in hop_runs(m)]
    return tuple(paired_ratio_difference(results(model), results(other), metric=metric, n_boot=_RATE["N_BOOT"]))


def _hop_table34(d) -> list[float]:
    return [v for m in ROWS for c in [hop_cells34(m)] for v in
            [hop_cells34(m)[10.0].rate, *[c[float(h)].ratio for h in HOPS], c[12.0].ratio_ci_low, c[12.0].ratio_ci_high]]


def _hop_retrains() -> list[dict]:
    return [json.loads(line) for a in ARMS
            for line in (STUDY / "cape_parts" / "hop" / a / "retrained.jsonl").read_text().splitlines() if line.strip()]


def _grows(d, model) -> list[str]:
    ratios = [cell(d, model, r).ratio for r in RUNGS]
    return [] if all(b > a for a, b in zip(ratios, ratios[1:])) else [f"{model}: {ratios}"]


def _grows34(d, model) -> list[str]:
    ratios = [cell34(d, model, r).ratio for r in RUNGS]
    return [] if all(b > a for a, b in zip(ratios, ratios[1:])) else [f"{model} (seeds 3, 4): {ratios}"]


def _length_table(d) -> list[float]:
    return [v for m in ROWS for c in [cell(d, m)] for v in
            [*[cell(d, m, r).ratio for r in RUNGS], c.ci_low, c.ci_high, c.alone]]


def _tempo_table(d) -> list[float]:
    return [tempo_ratios(m)[t] for m in ROWS for t in TEMPI]


def _includes_zero34(pairs) -> list[str]:
    return [f"{a} vs {b} at tempo {t:g} (seeds 3, 4): {x}" for a, b, t in pairs for x in [tempo_vs34(a, b, t)]
            if not x[1] <= 0 <= x[2]]


def _includes_zero(pairs) -> list[str]:
    return [f"{a} vs {b} at tempo {t:g}: {x}" for a, b, t in pairs for x in [tempo_vs(a, b, t)] if not x[1] <= 0 <= x[2]]


LENGTH_HEADER = ("| model | 5 s | 10 s | 20 s | 40 s | 80 s | 160 s | 160 s CI | CER alone (%) |\n"
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
TEMPO_HEADER = "| model | 0.8 | 0.9 | 1.1 | 1.2 | 1.3 |\n| --- | ---: | ---: | ---: | ---: | ---: |\n"

CAPE_PARTS_CLAIMS = [
    Claim("opening: shift only like full CAPE",
          "With the global shift alone CAPE degrades like full CAPE (in-context ratio {}× against {}× at\n160 s, "
          "paired difference {} [{}, {}])",
          lambda d: [cell(d, "cape_shift_only").ratio, cell(d, "cape").ratio, *vs_cape(d, "cape_shift_only")]),
    Claim("opening: without the shift",
          "the ratio grows at every doubling almost as sinusoidal's does ({}× and {}×\nagainst {}×; {} [{}, {}] "
          "and {} [{}, {}] above full CAPE)",
          lambda d: [cell(d, "cape_scale_only").ratio, cell(d, "cape_local_only").ratio, cell(d, "sinusoidal").ratio,
                     *vs_cape(d, "cape_scale_only"), *vs_cape(d, "cape_local_only")]),
    Fact("scaling only and local only grow at every doubling", "the ratio grows at every doubling",
         lambda d: _grows(d, "cape_scale_only") + _grows(d, "cape_local_only")),
    Claim("opening: 60 s shift", "The paper's 60 s\nshift is no different from the default 30 s ({}×, {} [{}, {}])",
          lambda d: [cell(d, "cape_shift60").ratio, *vs_cape(d, "cape_shift60")]),
    Fact("60 s shift: CI includes 0", "no different from the default 30 s",
         lambda d: [] if vs_cape(d, "cape_shift60")[1] <= 0 <= vs_cape(d, "cape_shift60")[2] else ["CI excludes 0"]),
    Claim("opening: rate",
          "at tempo 1.3 on the short pool every arm's CER is {}-{}× its value as\nrecorded, against {}× for `none` and "
          "{}× for full CAPE; global scaling alone, the part meant\nfor it, degrades more than full CAPE there ({} [{}, {}])",
          lambda d: [min(tempo_ratios(a)[1.3] for a in ARMS), max(tempo_ratios(a)[1.3] for a in ARMS),
                     tempo_ratios("none")[1.3], tempo_ratios("cape")[1.3], *tempo_vs("cape_scale_only", "cape", 1.3)]),
    Fact("no part buys rate robustness (every arm within none's CI at 1.3)", "On the rate axis no\npart buys robustness",
         lambda d: _includes_zero([(a, "none", 1.3) for a in ARMS])),
    Claim("length table", LENGTH_HEADER + "\n".join(
        f"| {NAME[m]} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} | [{{}}, {{}}] | {{}} |" for m in ROWS), _length_table),
    Claim("length: paired differences at 160 s",
          "each model's ratio minus full CAPE's: global shift only\n{} [{}, {}], global scaling only {} [{}, {}], "
          "local shift only {} [{}, {}], 60 s shift {} [{}, {}], `none` {} [{}, {}], sinusoidal {} [{},\n{}]",
          lambda d: [v for m in ("cape_shift_only", "cape_scale_only", "cape_local_only", "cape_shift60", "none",
                                 "sinusoidal") for v in vs_cape(d, m)]),
    Claim("length table, seeds 3 and 4", LENGTH_HEADER.replace("160 s CI", "160 s CI (crossed)")
          + "\n".join(f"| {NAME[m]} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} | [{{}}, {{}}] | {{}} |" for m in ROWS),
          _length_table34),
    Claim("length, seeds 3 and 4: paired differences at 160 s",
          "each model's ratio minus full CAPE's, seeds 3 and 4: global shift only {} [{}, {}], global scaling only "
          "{} [{}, {}], local shift only {} [{}, {}], 60 s shift {} [{}, {}], `none` {} [{}, {}], sinusoidal {} [{}, {}]",
          lambda d: [v for m in ("cape_shift_only", "cape_scale_only", "cape_local_only", "cape_shift60", "none",
                                 "sinusoidal") for v in vs_cape34(d, m)]),
    Fact("seeds 3 and 4: scaling only and local only above full CAPE, shift only and 60 s not",
         "Seed 3 says the same",
         lambda d: [f"{m}: {x}" for m in ("cape_scale_only", "cape_local_only") for x in [vs_cape34(d, m)] if not x[1] > 0]
         + [f"{m}: {x}" for m in ("cape_shift_only", "cape_shift60") for x in [vs_cape34(d, m)] if not x[1] <= 0 <= x[2]]
         + _grows34(d, "cape_scale_only") + _grows34(d, "cape_local_only")),
    Claim("opening: seeds 3 and 4", "pooled over seeds 3 and 4, global shift only {}× against full CAPE's {}× at 160 s "
          "({} [{}, {}]), global scaling only {}× and local shift only {}× ({} [{}, {}] and {} [{}, {}] above full CAPE), "
          "the 60 s shift {}× ({} [{}, {}])",
          lambda d: [cell34(d, "cape_shift_only").ratio, cell34(d, "cape").ratio, *vs_cape34(d, "cape_shift_only"),
                     cell34(d, "cape_scale_only").ratio, cell34(d, "cape_local_only").ratio,
                     *vs_cape34(d, "cape_scale_only"), *vs_cape34(d, "cape_local_only"),
                     cell34(d, "cape_shift60").ratio, *vs_cape34(d, "cape_shift60")]),
    Claim("seeds 3 and 4: none below full CAPE", "`none` is {} [{}, {}] below full CAPE at 160 s over both seeds",
          lambda d: [-vs_cape34(d, "none")[0], -vs_cape34(d, "none")[2], -vs_cape34(d, "none")[1]]),
    Fact("seeds 3 and 4: none below full CAPE, CI excludes 0", "`none` is",
         lambda d: [] if vs_cape34(d, "none")[2] < 0 else [f"none - cape: {vs_cape34(d, 'none')}"]),
    Claim("short pool size", "the short pool (`ladder_test_alone`, {} utterances of {}-{} s)",
          lambda d: _short_pool()),
    Claim("tempo table", TEMPO_HEADER + "\n".join(
        f"| {NAME[m]} | {{}} | {{}} | {{}} | {{}} | {{}} |" for m in ROWS), _tempo_table),
    Claim("tempo 1.3: arms minus none",
          "each arm's ratio minus `none`'s: global shift only\n{} [{}, {}], global scaling only {} [{}, {}], "
          "local shift only {} [{}, {}], 60 s shift {} [{}, {}]",
          lambda d: [v for a in ARMS for v in tempo_vs(a, "none", 1.3)]),
    Fact("tempo 1.3: every CI against none includes 0", "(every CI includes 0)",
         lambda d: _includes_zero([(a, "none", 1.3) for a in ARMS])),
    Claim("tempo 1.3: scaling only minus full CAPE", "minus full CAPE's: global scaling\nonly {} [{}, {}]",
          lambda d: tempo_vs("cape_scale_only", "cape", 1.3)),
    Fact("tempo 1.3: the others within 0.02 of full CAPE", "the others within ±0.02 with CIs that include 0",
         lambda d: [f"{a}: {x}" for a in ("cape_shift_only", "cape_local_only", "cape_shift60")
                    for x in [tempo_vs(a, "cape", 1.3)] if abs(x[0]) > 0.02 or not x[1] <= 0 <= x[2]]),
    Fact("tempo 0.8: every arm within both CIs", "At tempo 0.8 every\narm is within the paired CI of both `none` and full CAPE",
         lambda d: _includes_zero([(a, b, 0.8) for a in ARMS for b in ("none", "cape")])),
    Claim("tempo table, seeds 3 and 4", "| model | 0.8 | 0.9 | 1.1 | 1.2 | 1.3 | 1.3 CI (crossed) |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(
              f"| {NAME[m]} | {{}} | {{}} | {{}} | {{}} | {{}} | [{{}}, {{}}] |" for m in ROWS), _tempo_table34),
    Claim("tempo 1.3, seeds 3 and 4: arms minus none",
          "ratios minus `none`'s: global\nshift only {} [{}, {}], global scaling only {} [{}, {}], local "
          "shift only {}\n[{}, {}], 60 s shift {} [{}, {}], full CAPE {} [{}, {}]",
          lambda d: [v for a in (*ARMS, "cape") for v in tempo_vs34(a, "none", 1.3)]),
    Fact("tempo 1.3, seeds 3 and 4: shift only and 60 s below none, full CAPE not",
         "Global shift\nonly and the 60 s shift degrade a little less than `none` (CIs below 0); full CAPE's CI includes 0",
         lambda d: [f"{a}: {x}" for a in ("cape_shift_only", "cape_shift60") for x in [tempo_vs34(a, "none", 1.3)]
                    if not x[2] < 0] + _includes_zero34([("cape", "none", 1.3)])),
    Claim("tempo 1.3, seeds 3 and 4: scaling only minus full CAPE", "Minus full CAPE's: global scaling only {} [{}, {}]\n"
          "(seed 4 alone: {} [{}, {}])", lambda d: [*tempo_vs34("cape_scale_only", "cape", 1.3),
                                                   *tempo_vs("cape_scale_only", "cape", 1.3)]),
    Fact("tempo 1.3, seeds 3 and 4: no arm more than 0.10 below none", "No arm is more than 0.10 below `none`'s",
         lambda d: [f"{a}: {x}" for a in (*ARMS, "cape") for x in [tempo_vs34(a, "none", 1.3)] if x[0] < -0.10 - 5e-3]),
    Claim("tempo 1.3, seeds 3 and 4: none's ratio", "No arm is more than 0.10 below `none`'s {}×",
          lambda d: [tempo_cells34("none")[1.3].ratio]),
    Claim("opening: rate, seeds 3 and 4",
          "the global shift alone degrades a little less than `none` at tempo 1.3\n({}× against {}×, {} [{}, {}]), and "
          "global scaling alone is no longer above full CAPE\nwith its CI ({} [{}, {}])",
          lambda d: [tempo_cells34("cape_shift_only")[1.3].ratio, tempo_cells34("none")[1.3].ratio,
                     *tempo_vs34("cape_shift_only", "none", 1.3), *tempo_vs34("cape_scale_only", "cape", 1.3)]),
    Fact("opening: scaling only not above full CAPE, seeds 3 and 4", "global scaling alone is no longer above full CAPE",
         lambda d: _includes_zero34([("cape_scale_only", "cape", 1.3)])),
    Claim("hop table, seeds 3 and 4", "| model | CER at 10 ms (%) | 8 ms | 9 ms | 11 ms | 12 ms | 12 ms CI (crossed) |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(
              f"| {NAME[m]} | {{}} | {{}} | {{}} | {{}} | {{}} | [{{}}, {{}}] |" for m in ROWS), _hop_table34),
    Claim("hop 12 ms, seeds 3 and 4: minus none", "ratios minus `none`'s at 12 ms: global shift only\n{} [{}, {}], global "
          "scaling only {} [{}, {}], local shift only {} [{}, {}], 60 s shift {} [{}, {}],\nfull CAPE {} [{}, {}], "
          "sinusoidal {} [{}, {}]",
          lambda d: [v for a in (*ARMS, "cape", "sinusoidal") for v in hop_vs34(a, "none", 12.0)]),
    Fact("hop 12 ms: every CAPE arm and sinusoidal below none", "Every CAPE arm and sinusoidal degrade less than\n"
         "`none` (CIs below 0)",
         lambda d: [f"{a}: {x}" for a in (*ARMS, "cape", "sinusoidal") for x in [hop_vs34(a, "none", 12.0)] if not x[2] < 0]),
    Claim("hop 12 ms: minus full CAPE", "minus full CAPE's at 12 ms: global shift only {}\n[{}, {}], global scaling only {} "
          "[{}, {}], local shift only {} [{}, {}], 60 s shift {} [{}, {}]",
          lambda d: [v for a in ARMS for v in hop_vs34(a, "cape", 12.0)]),
    Fact("hop 12 ms: every arm within full CAPE's CI", "every arm is where full CAPE is",
         lambda d: [f"{a}: {x}" for a in ARMS for x in [hop_vs34(a, "cape", 12.0)] if not x[1] <= 0 <= x[2]]),
    Fact("hop 12 ms, WER: the same but scaling only below full CAPE", "In WER at 12 ms the same holds",
         lambda d: [f"{a} - none: {x}" for a in (*ARMS, "cape", "sinusoidal") for x in [hop_vs34(a, "none", 12.0, "wer")]
                    if not x[2] < 0]
         + [f"{a} - cape: {x}" for a in ARMS if a != "cape_scale_only" for x in [hop_vs34(a, "cape", 12.0, "wer")]
            if not x[1] <= 0 <= x[2]]),
    Claim("hop 12 ms, WER: scaling only minus full CAPE", "global scaling alone degrades a little less than full\nCAPE "
          "({} [{}, {}])", lambda d: list(hop_vs34("cape_scale_only", "cape", 12.0, "wer"))
          + ([] if hop_vs34("cape_scale_only", "cape", 12.0, "wer")[2] <= 0.005 else [float("nan")])),
    Fact("opening: hop", "every arm degrades like full CAPE at\n12 ms and less than `none`, as sinusoidal does",
         lambda d: [f"{a}: {x}" for a in ARMS for x in [hop_vs34(a, "cape", 12.0)] if not x[1] <= 0 <= x[2]]
         + [f"{a}: {x}" for a in (*ARMS, "sinusoidal") for x in [hop_vs34(a, "none", 12.0)] if not x[2] < 0]),
    Fact("hop retrains: seven of eight other samples, the 60 s shift's seed 3 reproduced",
         "Seven of the eight retrains are other\nsamples of their arm's recipe",
         lambda d: [] if sorted((r["study"].rsplit("/", 1)[-1], r["run"]) for r in _hop_retrains() if r["reproduced"])
         == [("cape_shift60", "cape_ctc_s3")] and len(_hop_retrains()) == 8 else [str(_hop_retrains())]),
    Claim("hop retrains: hypotheses that differ", "{}-{} of {} test hypotheses\ndiffer from the archived run's",
          lambda d: [min(r["test"]["differing"] for r in _hop_retrains() if not r["reproduced"]),
                     max(r["test"]["differing"] for r in _hop_retrains() if not r["reproduced"]),
                     _hop_retrains()[0]["test"]["utterances"]]),
]
CAPE_PARTS_DOCUMENTS = {README: CAPE_PARTS_CLAIMS}
# what recipes/synth/RESULTS.md says of CAPE's parts (claims.py adds them to its CLAIMS)
CAPE_PARTS_RESULTS_CLAIMS = [
    Claim("RESULTS: CAPE's parts on length", "alone keeps it flat ({}× at 160 s, full CAPE {}×)",
          lambda d: [cell34(d, "cape_shift_only").ratio, cell34(d, "cape").ratio]),
    Fact("RESULTS: CAPE's parts on the rate axis", "at tempo 1.3 and hop 12 ms every part alone is\nwithin the paired "
         "CI of full CAPE",
         lambda d: _includes_zero34([(a, "cape", 1.3) for a in ARMS])
         + [f"{a} hop: {x}" for a in ARMS for x in [hop_vs34(a, "cape", 12.0)] if not x[1] <= 0 <= x[2]]),
]


def _short_pool() -> list[float]:
    from asr_pe.evaluation.in_context import read_records
    from asr_pe.run_folder import PER_UTT
    rows = read_records(_RATE["set_dir"](rate_run("none"), SHORT, "tempo", 1.0) / PER_UTT)
    durations = [float(r["duration"]) for r in rows]
    return [len(rows), min(durations), max(durations)]
