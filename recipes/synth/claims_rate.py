"""Every number of recipes/synth/study/rate/README.md (issue 45 point 3: the study on the rate axis),
computed from the runs archived in recipes/synth/study/rate/results.jsonl.xz.

Same machinery as recipes/synth/claims.py (which adds `RATE_DOCUMENTS` to its DOCUMENTS): a `Claim`
is the README's text with ``{}`` where its numbers stand and the numbers computed from the archive;
a `Fact` a statement in words and what contradicts it. The README's tables are claims whole
(caption, header and rows), so a cell edited by hand is reported. CIs are recomputed with the
generators' own seeds and 1000 resamples:

- a rate and its ratio to the plain rung: `asr_pe.plots.rate_ladder.rate_ladder` (what
  scripts/plot_rate_ladder.py writes to report/), a bootstrap over the utterances (one seed);
- a paired difference of two PEs' rates at one rung: `asr_pe.evaluation.length_ratio.difference_ci`
  (utterances resampled once per draw for both PEs);
- a paired difference of two PEs' ratios to the plain rung (how much more one degrades):
  `asr_pe.plots.results_claims.paired_ratio_difference`, each utterance's (rung, plain) errors of
  both PEs kept together.

Not checked: the date, the software versions, the device and the command lines (none of them is in
the archived files), and the rungs' values in the tables' headers (the values are computed at them).

``python recipes/synth/claims_rate.py`` prints what disagrees; ``--render`` prints the README's
tables filled in (how they were written).
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from pathlib import Path

from asr_pe.evaluation.in_context import InContextResult, RecordingRow, read_records
from asr_pe.evaluation.length_ratio import difference_ci
from asr_pe.evaluation.rate_ladder import default_values, rung_rate, run_hop_ms
from asr_pe.plots.rate_ladder import rate_ladder
from asr_pe.plots.results_claims import Claim, Fact, check_claims, paired_ratio_difference, supports
from asr_pe.results_table import locate
from asr_pe.run_folder import PER_UTT, result_dir

RATE = Path(__file__).resolve().parent / "study" / "rate"
README = RATE / "README.md"
PES = ("none", "sinusoidal", "rope", "relative", "cape")    # seed 4 (SEED)
# learned at seed 0, its only checkpoint (the ladder lane's retrain, ../ladder/more_pes/): in the
# tables and its own sentences, not in the seed-4 comparisons
LEARNED = "learned_wrap"
TABLE_PES = (*PES, LEARNED)
NAME = {"none": "`none`", "sinusoidal": "sinusoidal", "rope": "RoPE", "relative": "relative", "cape": "CAPE",
        LEARNED: "learned (seed 0)"}
SEED = 4
RUN_SEED = {**{pe: SEED for pe in PES}, LEARNED: 0}
N_BOOT = 1000
# (set, axis) of the three ladders: the study's test set (150 utterances of 1.5-60 s) and the length
# ladder's test pool decoded alone (1280 utterances of 2-3 s, inside the 5 s training length)
LADDERS = (("test", "tempo"), ("test", "hop_ms"), ("ladder_test_alone", "tempo"))
SET_NAME = {"test": "`test`", "ladder_test_alone": "`ladder_test_alone`"}
AXIS_NAME = {"tempo": "tempo", "hop_ms": "hop (ms)"}
METRICS = ("wer", "cer")
# the paired comparisons: CAPE against each other PE
RIVALS = ("none", "sinusoidal", "rope", "relative")
# the PEs archived at their second seed (learned joins when its seed 1 is archived)
SECOND_PES = TABLE_PES


# the second seed of each PE (retrain.sh; its own table, seed<N>/): seed 3, learned's seed 1
SECOND_SEED = {**{pe: 3 for pe in PES}, LEARNED: 1}
# which runs a reader pools: the seed-4 tables' ("first"), the second seed's, or both ("pooled": crossed
# CIs for rates and ratios; paired differences resample the utterances once for both seeds, which
# are fixed)
WHICH = ("first", "second", "pooled")


def run(pe: str, seed: int | None = None) -> Path:
    seed = RUN_SEED[pe] if seed is None else seed
    return RATE / ("" if seed == RUN_SEED[pe] else f"seed{seed}") / f"{pe}_ctc_s{seed}"


def runs(pe: str | Path, which: str = "first") -> list[Path]:
    """``pe``'s runs that ``which`` pools (an archived run folder stands for itself)."""
    if not isinstance(pe, str):
        return [pe]
    seeds = {"first": (RUN_SEED[pe],), "second": (SECOND_SEED[pe],), "pooled": (SECOND_SEED[pe], RUN_SEED[pe])}
    return [run(pe, s) for s in seeds[which]]


def rungs(axis: str) -> tuple[float, ...]:
    return tuple(float(v) for v in default_values(axis))


# the plain rung: the audio as recorded, the runs' own 10 ms hop (checked against each run's config)
PLAIN = {"tempo": 1.0, "hop_ms": 10.0}


def plain_value(axis: str) -> float:
    return PLAIN[axis]


def set_dir(pe: str | Path, test_set: str, axis: str, value: float) -> Path:
    """The archived eval folder of ``pe`` (a PE of this README, or any archived run's folder) at
    one rung (the plain rung is the plain eval/<set>)."""
    folder = run(pe) if isinstance(pe, str) else pe
    if run_hop_ms(folder) != PLAIN["hop_ms"]:
        raise ValueError(f"{folder}: hop {run_hop_ms(folder)} ms, the README's tables assume {PLAIN['hop_ms']}")
    return result_dir(folder, test_set, rung_rate(axis, value, run_hop_ms(folder)).suffix)


@lru_cache(maxsize=None)
def ladder(test_set: str, axis: str, which: str = "first", pes: tuple[str, ...] = TABLE_PES) -> dict:
    """pe -> its `LabelLadder` (rates and ratios with CIs, as report/<set>/rate_<axis>.md; ``which``:
    `WHICH`)."""
    out = {}
    for lad in rate_ladder([str(r) for pe in pes for r in runs(pe, which)], test_set, axis=axis, n_boot=N_BOOT):
        out[lad.label.split("/")[0]] = lad
    if sorted(out) != sorted(pes):
        raise ValueError(f"{RATE}: labels {sorted(out)} in the archive, expected {sorted(pes)}")
    return out


def _cell(pe, test_set, axis, value, metric, which):
    pes = TABLE_PES if which == "first" else SECOND_PES
    return ladder(test_set, axis, which, pes)[pe].rungs[metric][float(value)]


def rate(pe: str, test_set: str, axis: str, value: float, metric: str = "wer", which: str = "first"
         ) -> tuple[float, float, float]:
    r = _cell(pe, test_set, axis, value, metric, which)
    return r.rate, r.ci_low, r.ci_high


def ratio(pe: str, test_set: str, axis: str, value: float, metric: str = "wer", which: str = "first"
          ) -> tuple[float, float, float]:
    r = _cell(pe, test_set, axis, value, metric, which)
    return r.ratio, r.ratio_ci_low, r.ratio_ci_high


@lru_cache(maxsize=None)
def difference(a: str | Path, b: str | Path, test_set: str, axis: str, value: float, metric: str = "wer",
               which: str = "first") -> tuple[float, float, float]:
    """A's rate minus B's at one rung, in points, with its paired 95 % bootstrap CI over utterances
    (pooled: the seeds' mean rates, the utterances resampled once for every seed of both)."""
    d = difference_ci([set_dir(r, test_set, axis, value) for r in runs(a, which)],
                      [set_dir(r, test_set, axis, value) for r in runs(b, which)], metric=metric, n_boot=N_BOOT)
    if d is None:
        raise ValueError(f"{a} vs {b} {test_set} {axis}={value:g}: no paired difference (files or utterances)")
    return d


def _in_context(folder: Path, test_set: str, axis: str, value: float) -> InContextResult:
    """One run's rung against its plain rung as an in-context result (whole: the rung; alone: plain)."""
    rung = {r["id"]: r for r in read_records(set_dir(folder, test_set, axis, value) / PER_UTT)}
    plain = {r["id"]: r for r in read_records(set_dir(folder, test_set, axis, plain_value(axis)) / PER_UTT)}
    if sorted(rung) != sorted(plain):
        raise ValueError(f"{folder} {test_set} {axis}={value:g}: other utterances than the plain rung")
    rows = tuple(RecordingRow(u, float(plain[u]["duration"]), 1, int(plain[u]["ref_chars"]),
                              int(rung[u]["char_errors"]), int(plain[u]["char_errors"]), int(plain[u]["ref_words"]),
                              int(rung[u]["errors"]), int(plain[u]["errors"])) for u in sorted(rung))
    nan = float("nan")
    return InContextResult("wer", rows, nan, nan, nan, nan, nan, 0)


@lru_cache(maxsize=None)
def ratio_difference(a: str | Path, b: str | Path, test_set: str, axis: str, value: float, metric: str = "wer",
                     which: str = "first") -> tuple[float, float, float]:
    """A's ratio to its plain rung minus B's, with the paired 95 % bootstrap CI over utterances (A, B:
    PEs of this README or archived run folders; pooled: each ratio over both seeds' errors)."""
    return paired_ratio_difference([_in_context(r, test_set, axis, value) for r in runs(a, which)],
                                   [_in_context(r, test_set, axis, value) for r in runs(b, which)],
                                   metric=metric, n_boot=N_BOOT)


# ---------------------------------------------------------------- the README's tables

def _cols(axis: str) -> str:
    return " | ".join(f"{v:g}" for v in rungs(axis))


def rate_table(test_set: str, axis: str, metric: str) -> tuple[str, callable, str]:
    """(template, values, number format) of one table: the rate per PE and rung with its CI."""
    n = len(rungs(axis))
    lines = [f"{metric.upper()} (%) on {SET_NAME[test_set]}, {AXIS_NAME[axis]} ladder [95 % CI over utterances]:", "",
             f"| PE | {_cols(axis)} |", "| --- |" + " ---: |" * n]
    lines += [f"| {NAME[pe]} | " + " | ".join(["{} [{}, {}]"] * n) + " |" for pe in TABLE_PES]

    def values(d=None):
        return [x for pe in TABLE_PES for v in rungs(axis) for x in rate(pe, test_set, axis, v, metric)]
    return "\n".join(lines), values, ".1f"


def paired_table(test_set: str, axis: str) -> tuple[str, callable, str]:
    """CAPE minus each rival at every rung: the rates (points) and the ratios to the plain rung."""
    n = len(rungs(axis))
    plain = plain_value(axis)
    lines = [f"CAPE − other PE on {SET_NAME[test_set]}, {AXIS_NAME[axis]} ladder, paired [95 % CI over utterances]; "
             "rate rows in points, ratio rows: CAPE's ratio to its own plain rung minus the other's:", "",
             f"| CAPE − | metric | {_cols(axis)} |", "| --- | --- |" + " ---: |" * n]
    keys = []
    for other in RIVALS:
        for metric in METRICS:
            lines.append(f"| {NAME[other]} | {metric.upper()} | " + " | ".join(["{} [{}, {}]"] * n) + " |")
            keys += [("rate", other, v, metric) for v in rungs(axis)]
    for other in ("none", "sinusoidal"):
        for metric in METRICS:
            lines.append(f"| {NAME[other]} | {metric.upper()} ratio | "
                         + " | ".join("—" if v == plain else "{} [{}, {}]" for v in rungs(axis)) + " |")
            keys += [("ratio", other, v, metric) for v in rungs(axis) if v != plain]

    def values(d=None):
        out = []
        for kind, other, v, metric in keys:
            f = difference if kind == "rate" else ratio_difference
            out += list(f("cape", other, test_set, axis, v, metric))
        return out
    return "\n".join(lines), values, "+.2f"


TABLES = {f"{test_set} {axis} {metric}": rate_table(test_set, axis, metric)
          for test_set, axis in LADDERS for metric in METRICS}
TABLES.update({f"{test_set} {axis} paired": paired_table(test_set, axis) for test_set, axis in LADDERS})


def render(name: str) -> str:
    template, values, fmt = TABLES[name]
    pieces = template.split("{}")
    nums = values()
    if len(nums) != len(pieces) - 1:
        raise ValueError(f"{name}: {len(pieces) - 1} places, {len(nums)} values")
    return "".join(p + (format(x, fmt) if i < len(nums) else "") for i, (p, x) in
                   enumerate(zip(pieces, [*nums, None])))


# ---------------------------------------------------------------- the README's statements

ALONE = "ladder_test_alone"


def _r(pe, test_set, axis, value, metric="wer"):
    return rate(pe, test_set, axis, value, metric)[0]

FASTER = {"tempo": (1.1, 1.2, 1.3), "hop_ms": (11.0, 12.0)}


def _each(test_set, axis, skip_plain=False):
    return [v for v in rungs(axis) if not (skip_plain and v == plain_value(axis))]


def _faster_breaks_every_pe(d=None, which="first") -> list[str]:
    """Every PE's ratio to the plain rung (learned's too) is above 1 with its whole CI at every faster rung."""
    out = []
    for test_set, axis in LADDERS:
        for pe in (TABLE_PES if which == "first" else SECOND_PES):
            for v in FASTER[axis]:
                for metric in METRICS:
                    r, lo, hi = ratio(pe, test_set, axis, v, metric, which)
                    if lo <= 1:
                        out.append(f"{pe} {test_set} {axis}={v:g} {metric}: {r:.2f} [{lo:.2f}, {hi:.2f}]")
    return out


def _ratio_check(test_set, value, test, what, pes=TABLE_PES, metric="cer"):
    out = []
    for pe in pes:
        r, lo, hi = ratio(pe, test_set, "tempo", value, metric)
        if not test(lo, hi):
            out.append(f"{pe} {test_set} tempo={value:g} {metric}: {r:.2f} [{lo:.2f}, {hi:.2f}] is not {what}")
    return out


def _most_accurate(best, rivals, ladders, d=None, which="first") -> list[str]:
    """``best`` more accurate than each rival at every rung of ``ladders`` (paired CIs), WER and CER."""
    return [e for test_set, axis in ladders for v in rungs(axis) for other in rivals for metric in METRICS
            for e in supports("better", difference(best, other, test_set, axis, v, metric, which),
                              f"{best} vs {other} {test_set} {axis}={v:g} {metric}")]


def _pattern(kind, other, expected, d=None, pe="cape", which="first") -> list[str]:
    """``pe`` (CAPE) against ``other`` at every rung (non-plain for ratios) of the three ladders, both metrics:
    ``expected`` maps (set, axis, value, metric) to "better"/"worse" (rates) or "degrades
    less"/"degrades more" (ratios); every other cell must be "like" (its CI holds 0)."""
    f = difference if kind == "rate" else ratio_difference
    out = []
    for test_set, axis in LADDERS:
        for v in _each(test_set, axis, skip_plain=kind == "ratio"):
            for metric in METRICS:
                word = expected.get((test_set, axis, v, metric), "like")
                out += supports(word, f(pe, other, test_set, axis, v, metric, which),
                                f"{pe} vs {other} {kind} {test_set} {axis}={v:g} {metric}")
    return out


def _cape_vs_none_ratio(d=None, which="first"):
    return _pattern("ratio", "none", {("test", axis, v, m): "degrades less" for axis, v in
                                      (("tempo", 1.2), ("tempo", 1.3), ("hop_ms", 12.0)) for m in METRICS}, which=which)


def _durations(pe, test_set, axis, value):
    recs = read_records(set_dir(pe, test_set, axis, value) / PER_UTT)
    return [float(r["duration"]) for r in recs]


def _speaker_rates():
    from asr_pe.data.synth.corpus import SPEAKERS, SynthConfig
    cfg = SynthConfig()
    rates = [s.rate for s in SPEAKERS[:cfg.num_speakers]]
    return [cfg.num_speakers, min(rates), max(rates), 100 * cfg.rate_jitter]


def _config(pe="cape"):
    from asr_pe.run_folder import read_config
    return read_config(locate(run(pe)))


def _info(pe):
    import json
    return json.loads(locate(run(pe) / "run_info.json").read_text(encoding="utf-8"))


def _steps(d=None):
    import json
    steps = {json.loads(locate(set_dir(pe, t, a, v) / "buckets.meta.json").read_text())["checkpoint"]["global_step"]
             for pe in TABLE_PES for t, a in LADDERS for v in rungs(a)}
    if len(steps) != 1:
        raise ValueError(f"the archived decodings come from checkpoints of steps {sorted(steps)}")
    return [steps.pop()]


def _minmax(values):
    values = list(values)
    return [min(values), max(values)]


RATE_CLAIMS = [Claim(f"table {name}", template, values) for name, (template, values, _) in TABLES.items()]
ORDER = ("none", "sinusoidal", "cape", "rope", "relative")   # the order of the README's sentences
RATE_CLAIMS += [
    Fact("faster speech breaks every PE", "(ratio to the plain rung above 1 with its whole CI at tempo 1.1, 1.2 "
         "and 1.3 on both sets and at hops of 11 and 12 ms, WER and CER)", _faster_breaks_every_pe),
    Claim("seed", "seed {} of `none`, sinusoidal, RoPE, relative and CAPE",
          lambda d: [SEED] if {_info(pe)["seed"] for pe in PES} == {SEED} else [math.nan]),
    Claim("short pool: inside the training length", "2-3 s utterances, inside the {} s training length, so the "
          "rate is not mixed with length", lambda d: [max(_info(pe)["train_max_duration"] for pe in PES)]),
    Claim("tempo 1.3 CER ratios on the short pool", "30 % faster speech multiplies the CER by {}× for `none`, {}× "
          "for sinusoidal, {}× for CAPE, {}× for RoPE and {}× for relative",
          lambda d: [ratio(pe, ALONE, "tempo", 1.3, "cer")[0] for pe in ORDER]),
    Claim("tempo 0.8 CER ratios on the short pool", "at tempo 0.8 the short pool's CER is {}-{}× its value as "
          "recorded", lambda d: _minmax(ratio(pe, ALONE, "tempo", 0.8, "cer")[0] for pe in TABLE_PES)),
    Fact("tempo 0.8 above 1 for every PE", "(every PE above 1 with its CI)",
         lambda d: _ratio_check(ALONE, 0.8, lambda lo, hi: lo > 1, "above 1")),
    Fact("tempo 0.9 harmless", "at tempo 0.9 no PE's CER on the short pool is worse than as recorded with its CI",
         lambda d: _ratio_check(ALONE, 0.9, lambda lo, hi: lo <= 1, "within 1 or below")),
    Claim("tempo 0.9 RoPE and relative better", "and RoPE and relative are better there ({}× and {}×)",
          lambda d: [ratio(pe, ALONE, "tempo", 0.9, "cer")[0] for pe in ("rope", "relative")]),
    Fact("tempo 0.9 RoPE and relative better, CI", "and RoPE and relative are better there",
         lambda d: _ratio_check(ALONE, 0.9, lambda lo, hi: hi < 1, "below 1", ("rope", "relative"))),
    Fact("RoPE and relative degrade the most on the short pool", "on the short pool their ratios at tempo 1.1, "
         "1.2 and 1.3 are above those of `none`, sinusoidal and CAPE (paired CIs, WER and CER)",
         lambda d: [e for pe in ("rope", "relative") for other in ("none", "sinusoidal", "cape") for v in FASTER["tempo"]
                    for m in METRICS for e in supports("degrades more", ratio_difference(pe, other, ALONE, "tempo", v, m),
                                                       f"{pe} vs {other} tempo={v:g} {m}")]),
    Fact("relative most accurate on test", "relative is the most accurate PE at every rung of both ladders of `test`",
         lambda d: _most_accurate("relative", ("none", "sinusoidal", "rope", "cape"), LADDERS[:2])),
    Fact("RoPE and relative most accurate on the short pool", "on the short pool RoPE and relative are both more "
         "accurate than `none`, sinusoidal and CAPE at every rung (paired CIs)",
         lambda d: [e for pe in ("rope", "relative") for e in
                    _most_accurate(pe, ("none", "sinusoidal", "cape"), LADDERS[2:])]),
    Claim("tempo 1.3 CER on the short pool", "at tempo 1.3 the short pool's CER is {} % (RoPE) and {} % (relative) "
          "against {} % (`none`), {} % (sinusoidal) and {} % (CAPE)",
          lambda d: [_r(pe, ALONE, "tempo", 1.3, "cer") for pe in ("rope", "relative", "none", "sinusoidal", "cape")]),
    Fact("CAPE less accurate than none everywhere", "CAPE is less accurate than `none` at every rung of every "
         "ladder (WER and CER, paired CIs above 0)",
         lambda d: _pattern("rate", "none", {(t, a, v, m): "worse" for t, a in LADDERS for v in rungs(a)
                                             for m in METRICS})),
    Claim("CAPE vs none ratio at tempo 1.3 on test", "(WER at tempo 1.3: {}× against {}×, paired difference {} "
          "[{}, {}]", lambda d: [ratio("cape", "test", "tempo", 1.3)[0], ratio("none", "test", "tempo", 1.3)[0],
                                 *ratio_difference("cape", "none", "test", "tempo", 1.3)]),
    Fact("CAPE vs none ratio: where smaller", "smaller with its paired CI at tempo 1.2 and 1.3 and at hop 12 ms on "
         "`test`, WER and CER)", _cape_vs_none_ratio),
    Fact("CAPE vs none ratio: like on the short pool", "on the short pool, where the rate is not mixed with length, "
         "its ratio is within the paired CI of `none`'s at every rung", _cape_vs_none_ratio),
    Claim("CAPE minus none at tempo 1.3", "tempo 1.3 {} [{}, {}] WER points on `test` and {} [{}, {}] on the short "
          "pool", lambda d: [*difference("cape", "none", "test", "tempo", 1.3),
                             *difference("cape", "none", ALONE, "tempo", 1.3)]),
    Fact("CAPE vs sinusoidal rates", "on the short pool CAPE is less accurate than sinusoidal at every rung (WER and "
         "CER, paired CIs); on `test` it is more accurate only at tempo 0.8 (WER and CER) and at hop 8 ms (WER), "
         "within the paired CIs elsewhere",
         lambda d: _pattern("rate", "sinusoidal", {
             **{(ALONE, "tempo", v, m): "worse" for v in rungs("tempo") for m in METRICS},
             ("test", "tempo", 0.8, "wer"): "better", ("test", "tempo", 0.8, "cer"): "better",
             ("test", "hop_ms", 8.0, "wer"): "better"})),
    Fact("CAPE vs sinusoidal ratios", "CAPE's is smaller at tempo 0.8 on both sets and at tempo 1.2 and 1.3 in WER "
         "on the short pool, larger at tempo 1.2 and at hop 11 ms in WER on `test`, within the paired CIs elsewhere",
         lambda d: _pattern("ratio", "sinusoidal", {
             **{(t, "tempo", 0.8, m): "degrades less" for t in ("test", ALONE) for m in METRICS},
             (ALONE, "tempo", 1.2, "wer"): "degrades less", (ALONE, "tempo", 1.3, "wer"): "degrades less",
             ("test", "tempo", 1.2, "wer"): "degrades more", ("test", "hop_ms", 11.0, "wer"): "degrades more"})),
    Fact("learned degrades like none", "its ratio to its own plain rung is within the paired CI\n  of `none`'s at "
         "every rung of every ladder (WER and CER)", lambda d: _pattern("ratio", "none", {}, pe=LEARNED)),
    Claim("learned: tempo 1.3 on the short pool", "30 % faster speech multiplies its\n  short-pool CER by {}×",
          lambda d: [ratio(LEARNED, ALONE, "tempo", 1.3, "cer")[0]]),
    Fact("learned more accurate than sinusoidal on test, than CAPE on the short pool",
         "It is more accurate than sinusoidal at every rung of both ladders of\n  `test`, and than CAPE at every rung "
         "of the short pool (paired CIs)",
         lambda d: _most_accurate(LEARNED, ("sinusoidal",), LADDERS[:2]) + _most_accurate(LEARNED, ("cape",), LADDERS[2:])),
    Claim("learned: its seed", "Seed {} is the length\n  ladder's retrain", lambda d: [_info(LEARNED)["seed"]]),
    Claim("CAPE's global scaling", "(λ log-uniform in [{}/{}, {}], the authors' value) stretches the position axis "
          "only, about a tempo of {}-{}",
          lambda d: [1, (s := float(_config().pe.input.max_global_scaling)), s, 1 / s, s]),
    Claim("steps", "their `best.ckpt` (step {} each)", _steps),
    Claim("test set", "`test`, the study's test set ({} utterances, {} per doubling bucket, {}-{} s as recorded, so "
          "{}-{} s at tempo 0.8",
          lambda d: [len(_durations("none", "test", "tempo", 1.0)), int(_config().data.corpus.test_per_bucket),
                     *_minmax(_durations("none", "test", "tempo", 1.0)),
                     *_minmax(_durations("none", "test", "tempo", 0.8))]),
    Claim("short pool", "({} utterances of {}-{} s, {}-{} s at tempo 0.8: all inside the training length)",
          lambda d: [len(_durations("none", ALONE, "tempo", 1.0)), *_minmax(_durations("none", ALONE, "tempo", 1.0)),
                     *_minmax(_durations("none", ALONE, "tempo", 0.8))]),
    Claim("hop", "the runs' own hop is {} ms, so {} ms shows the model speech {}× faster",
          lambda d: [run_hop_ms(run("none")), 12, 12 / run_hop_ms(run("none"))]),
    Claim("dev set", "the dev set exists ({} utterances of the synth corpus", lambda d: [_info("cape")["data_report"]["dev_read"]]),
    Claim("bootstrap draws", "resamples utterances only ({} percentile-bootstrap draws",
          lambda d: [N_BOOT] if {_meta_n_boot(pe) for pe in PES} == {N_BOOT} else [math.nan]),
    Claim("corpus speakers", "espeak-ng voices of {} speakers (the training speakers)",
          lambda d: _speaker_rates()[:1]),
    Claim("speaker rates", "speak at {}-{} words per minute with ±{} % jitter", lambda d: _speaker_rates()[1:]),
    Claim("model size", "The models are small ({}-layer, {}-d Transformer, {} h of training audio)",
          lambda d: [int(_config().encoder.n_layers), int(_config().encoder.d_model), _info("cape")["train_hours"]]),
]


def _meta_n_boot(pe):
    import json
    return json.loads(locate(set_dir(pe, "test", "tempo", 1.0) / "buckets.meta.json").read_text())["settings"]["n_boot"]


def retrained_records() -> list[dict]:
    """The retrain lane's reproduction records (retrained.jsonl), one a run: the one reader of the file."""
    import json
    return [json.loads(x) for x in (RATE / "retrained.jsonl").read_text().splitlines() if x.strip()]


def _retrained_exactly(run_name: str) -> list[str]:
    """The retrain lane's record of ``run_name``: every hypothesis equal to its archived run's."""
    got = [x for x in retrained_records() if x["run"] == run_name]
    if len(got) != 1:
        return [f"retrained.jsonl holds {len(got)} lines of {run_name}"]
    x = got[0]
    return [] if x["reproduced"] and x["test"]["differing"] == 0 and x["longform"]["differing"] == 0 else [str(x)]


def _seed3_status() -> list[str]:
    """The retrain lane's record: the five PEs' seed-3 runs, none reproduced."""
    lines = [x for x in retrained_records() if x["run"].endswith("_s3")]
    want = {f"{pe}_ctc_s3" for pe in PES}
    return ([] if sorted(x["run"] for x in lines) == sorted(want) else [f"retrained.jsonl holds {sorted(x['run'] for x in lines)}"])\
        + [f"{x['run']} reproduced" for x in lines if x["reproduced"]]


RATE_CLAIMS.append(Fact("seed 3: five archived, none reproduced", "none reproduces the study's archived seed-3 run",
                        lambda d: _seed3_status()))

# ---------------------------------------------------------------- seed 3, and both seeds pooled

SHORT_TEMPI = tuple(v for v in rungs("tempo") if v != PLAIN["tempo"])


def _pooled_table(d=None) -> list[float]:
    return [x for pe in (*ORDER, LEARNED) for v in SHORT_TEMPI for x in ratio(pe, ALONE, "tempo", v, "cer", "pooled")]


POOLED_TABLE = ("| PE | " + " | ".join(f"{v:g}" for v in SHORT_TEMPI) + " |\n| --- |" + " ---: |" * len(SHORT_TEMPI)
                + "\n" + "\n".join(f"| {NAME[pe] if pe != LEARNED else 'learned (seeds 0, 1)'} | "
                                    + " | ".join(["{} [{}, {}]"] * len(SHORT_TEMPI)) + " |" for pe in (*ORDER, LEARNED)))
_CAPE_WORSE = {(t, a, v, m): "worse" for t, a in LADDERS for v in rungs(a) for m in METRICS}
# the two cells where seed 3's CAPE is not less accurate than its `none` with the paired CI
_CAPE_NOT_WORSE_S3 = ((ALONE, "tempo", 1.0, "wer"), (ALONE, "tempo", 1.3, "wer"))
_SECOND = "second"
RATE_CLAIMS += [
    Claim("opening: seed 3", "30 % faster speech multiplies the short pool's CER by {}× for `none`, {}× for sinusoidal,\n"
          "{}× for CAPE, {}× for RoPE and {}× for relative",
          lambda d: [ratio(pe, ALONE, "tempo", 1.3, "cer", "pooled")[0] for pe in ("none", "sinusoidal", "cape", "rope",
                                                                                     "relative")]),
    Fact("opening: pooled, CAPE less accurate than none everywhere", "pooled over seeds 3 and 4, CAPE is less accurate "
         "than `none` at every rung of every ladder (paired\nCIs)", lambda d: _pattern("rate", "none", _CAPE_WORSE,
                                                                                         which="pooled")),
    Fact("seed 3 alone: faster speech breaks every PE", "faster speech breaks every PE, learned's seed 1 included (ratio to the plain rung above 1 "
         "with its CI at every faster rung\n  of every ladder, WER and CER)", lambda d: _faster_breaks_every_pe(which=_SECOND)),
    Fact("seed 3 alone: RoPE and relative degrade more on the short pool, and are more accurate",
         "on the short pool RoPE and relative degrade more than `none`, sinusoidal and CAPE at tempo 1.1,\n  1.2 and 1.3, "
         "and are more accurate than them at every rung (paired CIs, WER and CER)",
         lambda d: [e for pe in ("rope", "relative") for other in ("none", "sinusoidal", "cape") for v in FASTER["tempo"]
                    for m in METRICS for e in supports("degrades more", ratio_difference(pe, other, ALONE, "tempo", v, m,
                                                                                          _SECOND), f"{pe} vs {other} {v:g} {m}")]
         + [e for pe in ("rope", "relative") for e in _most_accurate(pe, ("none", "sinusoidal", "cape"), LADDERS[2:],
                                                                     which=_SECOND)]),
    Fact("seed 3 alone: relative most accurate on test", "relative\n  is again the most accurate PE at every rung of both "
         "ladders of `test`", lambda d: _most_accurate("relative", ("none", "sinusoidal", "rope", "cape"), LADDERS[:2],
                                                       which=_SECOND)),
    Fact("seed 3 alone: CAPE vs none ratio", "CAPE's ratio grows less than `none`'s at tempo 1.2 and 1.3 and at hop 12 ms "
         "on `test` (WER and\n  CER;", lambda d: _cape_vs_none_ratio(which=_SECOND)),
    Claim("seed 3 alone: CAPE vs none ratio at tempo 1.3", "at tempo 1.3 in WER {} [{}, {}]) and within the paired CI on "
          "the short pool", lambda d: ratio_difference("cape", "none", "test", "tempo", 1.3, "wer", _SECOND)),
    Fact("seed 3 alone: CAPE less accurate than none but at two cells", "CAPE is less accurate than `none` at every rung "
         "of every ladder but two, where the paired CI\n  touches 0", lambda d: _pattern(
             "rate", "none", {k: v for k, v in _CAPE_WORSE.items() if k not in _CAPE_NOT_WORSE_S3}, which=_SECOND)),
    Claim("seed 3 alone: the two cells", "the short pool's WER as recorded, {} [{}, {}], and at tempo 1.3, {} [{}, {}]",
          lambda d: [x for k in _CAPE_NOT_WORSE_S3 for x in difference("cape", "none", *k, _SECOND)]),
    Fact("pooled: CAPE vs sinusoidal", "Pooled over both seeds, CAPE is more accurate than sinusoidal on `test` at tempo "
         "0.8, 0.9 and 1 and\nat hops of 8, 9 and 10 ms (WER and CER) and 11 ms (CER), within the paired CIs at the "
         "faster rungs,\nand less accurate on the short pool at every rung (paired CIs, WER and CER)",
         lambda d: _pattern("rate", "sinusoidal", {
             **{("test", "tempo", v, m): "better" for v in (0.8, 0.9, 1.0) for m in METRICS},
             **{("test", "hop_ms", v, m): "better" for v in (8.0, 9.0, 10.0) for m in METRICS},
             ("test", "hop_ms", 11.0, "cer"): "better",
             **{(ALONE, "tempo", v, m): "worse" for v in rungs("tempo") for m in METRICS}}, which="pooled")),
    Claim("seed 3: sinusoidal on test as recorded", "seed 3's sinusoidal has {} % WER there as\nrecorded, seed 4's {} %",
          lambda d: [rate("sinusoidal", "test", "tempo", 1.0, "wer", w)[0] for w in (_SECOND, "first")]),
    Claim("pooled table: short pool CER ratios", POOLED_TABLE, _pooled_table),
    Fact("learned seed 1 reproduces its archived run", "which reproduces the archived\n`../runs/learned_wrap_ctc_s1` "
         "exactly: every test and long-form hypothesis the same", lambda d: _retrained_exactly("learned_wrap_ctc_s1")),
    Fact("learned, pooled: like none", "pooled with seed 0, its ratio is within the paired CI of\n`none`'s (seeds 3 and 4) "
         "at every rung of every ladder (WER and CER)", lambda d: _pattern("ratio", "none", {}, pe=LEARNED, which="pooled")),
    Fact("learned, seed 1 alone: like none but one cell", "alone, at every rung but one,\nthe short pool's tempo 1.2 in WER",
         lambda d: _pattern("ratio", "none", {(ALONE, "tempo", 1.2, "wer"): "degrades more"}, pe=LEARNED, which=_SECOND)),
    Claim("learned, seed 1 alone: the cell", "the short pool's tempo 1.2 in WER ({} [{}, {}])",
          lambda d: ratio_difference(LEARNED, "none", ALONE, "tempo", 1.2, "wer", _SECOND)),
    Claim("learned, seed 1: tempo 1.3 short pool", "At tempo 1.3 its short-pool CER is {}×\nits value as recorded",
          lambda d: [ratio(LEARNED, ALONE, "tempo", 1.3, "cer", _SECOND)[0]]),
    Fact("learned, seed 1: more accurate than sinusoidal on test, than CAPE on the short pool",
         "it is again more accurate than sinusoidal at every rung of both\nladders of `test` and than CAPE at every rung "
         "of the short pool (paired CIs)", lambda d: _most_accurate(LEARNED, ("sinusoidal",), LADDERS[:2], which=_SECOND)
         + _most_accurate(LEARNED, ("cape",), LADDERS[2:], which=_SECOND)),
]
RATE_DOCUMENTS = {README: RATE_CLAIMS}
# what recipes/synth/RESULTS.md says of the rate study (claims.py adds them to its CLAIMS)
RATE_RESULTS_CLAIMS = [
    Claim("RESULTS: tempo 1.3 CER ratios on the short pool", "multiplies the CER of 2-3 s utterances by {}-{}×",
          lambda d: _minmax(ratio(pe, ALONE, "tempo", 1.3, "cer", "pooled")[0] for pe in PES)),
    Fact("RESULTS: CAPE less accurate than none everywhere", "CAPE is less accurate than `none` at every rung of "
         "every ladder.", lambda d: _pattern("rate", "none", _CAPE_WORSE, which="pooled")),
]


def failures() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [f"{README.name}: {f.name}: {f.message}" for f in check_claims(text, RATE_CLAIMS, None)]


if __name__ == "__main__":
    if sys.argv[1:] == ["--render"]:
        print("\n\n".join(render(name) for name in TABLES))
        sys.exit(0)
    problems = failures()
    print("\n".join(problems) or f"all {len(RATE_CLAIMS)} claims of {README.name} agree with the archived runs")
    sys.exit(1 if problems else 0)
