"""Every quantitative statement of recipes/synth/RESULTS.md about the archived study (and of the
study notes it quotes), with the numbers computed from the runs under recipes/synth/study/ (the
demo's from study/demo/). Not checked, because their files are not archived: the cost and config figures,
and the superseded studies (History, and the earlier runs in study/rerun_vs_earlier.md).

Each entry is a `Claim` (the sentence with ``{}`` where its numbers stand, and the numbers computed
from the archive) or a `Fact` (a statement in words, and what contradicts it). Tables of RESULTS.md
that copy a generated study table are checked cell by cell against it (`copied_rows`).
`tests/recipes/test_results_claims.py` checks them all; ``python recipes/synth/claims.py`` prints
what disagrees. CIs are recomputed (1000 resamples, the generators' seed), so a printed CI must be
the one the study's tables give.

Seeds are named in every path, so the claims do not move when new seeds are archived.
"""

from __future__ import annotations

import sys
from pathlib import Path

from asr_pe.plots.results_claims import LONG, Claim, Fact, StudyData, check_claims, markdown_rows, supports

RECIPE = Path(__file__).resolve().parent
STUDY = RECIPE / "study"
S01 = (0, 1)
S0_4 = (0, 1, 2, 3, 4)
# the seeds of the long-form study archived per PE (study/runs: 0, 1; study/seeds: 2 onwards)
SEEDS = {"rope": S0_4, "none": S0_4, "relative": S0_4, "sinusoidal": S0_4, "cape": S0_4}
F70L = "arms/frontend70_long"  # the 70 ms front end's 3x-budget arm
# the seeds a folder's shorthands use when none are named (every other folder: S01)
FOLDER_SEEDS = {F70L: (0, 1, 2)}
TEST_BUCKETS = ("0-2", "2-4", "4-8", "8-16", "16-32", "32-64")
ROPE_DECODINGS = {"plain": "", "window": "_window", "window:10": "_window10", "chunked": "_chunked",
                  "NTK": "_rope_ntk", "logit scale": "_logit_scale", "YaRN": "_rope_yarn",
                  "position interpolation": "_rope_pi"}


def study_data(n_boot: int = 1000) -> StudyData:
    return StudyData(STUDY, STUDY / "longform" / "parts.json", n_boot=n_boot,
                     ladder_composition=STUDY / "ladder" / "ladder_composition.jsonl.xz")


# ---------------------------------------------------------------- shorthands over the archive

def runs(d, pe, folder="runs", seeds=None, head="ctc"):
    """Run paths; ``folder`` "seeds": the later seeds, archived in study/seeds/, with 0 and 1 from study/runs/;
    ``seeds`` None: the folder's own (`FOLDER_SEEDS`)."""
    if seeds is None:
        seeds = FOLDER_SEEDS.get(folder, S01)
    if folder == "seeds":
        return tuple(d.paths("runs" if s in S01 else "seeds", pe, (s,), head)[0] for s in seeds)
    return d.paths(folder, pe, seeds, head)


def cer(d, pe, bucket="2-4", set_name="test", folder="runs", seeds=None, head="ctc", metric="cer"):
    """Seed mean; ``bucket`` LONG (the default of the long-form sets) for the 160 s recordings."""
    if set_name.startswith("longform"):
        bucket = LONG
    return d.value(runs(d, pe, folder, seeds, head), set_name, bucket, metric)


def per_seed(d, pe, bucket="2-4", set_name="test", folder="runs", seeds=None, head="ctc"):
    if set_name.startswith("longform"):
        bucket = LONG
    return d.per_seed(runs(d, pe, folder, seeds, head), set_name, bucket)


def long_(d, pe, suffix="", **kw):
    return cer(d, pe, LONG, "longform" + suffix, **kw)


def trio(d, pe, suffix="", **kw):
    """CER at 2-4 s, 32-64 s and 160 s."""
    return [cer(d, pe, "2-4", "test" + suffix, **kw), cer(d, pe, "32-64", "test" + suffix, **kw),
            long_(d, pe, suffix, **kw)]


def ratio(d, pe, suffix="", **kw):
    """160 s over 2-4 s, seed means, the same decoding in both."""
    return long_(d, pe, suffix, **kw) / cer(d, pe, "2-4", "test" + suffix, **kw)


def ratio_ci(d, pe, folder="runs", seeds=None):
    return list(d.ratio_ci(runs(d, pe, folder, seeds)))


def in_ctx(d, pe, folder="runs", seeds=None):
    return d.in_context(runs(d, pe, folder, seeds)).pooled


def _ic(d, pe, folder="runs", seeds=None):
    r = in_ctx(d, pe, folder, seeds)
    return [r.ratio, r.ci_low, r.ci_high]


def icdiff(d, pe, other, folder="runs", seeds=None):
    """In-context ratio of ``pe`` minus ``other``'s on the long-form set, paired over recordings."""
    return list(d.in_context_difference(runs(d, pe, folder, seeds), runs(d, other, folder, seeds)))


def cost(d, pe_run, plain="", folder="remedies", suffix="", plain_pe=None):
    """2-4 s CER of a (training and/or inference) remedy minus the plain model's, mean over the
    seeds that have both (as `remedy_table` computes it)."""
    mine = per_seed(d, pe_run, "2-4", "test" + suffix, folder)
    base = per_seed(d, plain_pe or pe_run.split("_")[0], "2-4", "test")
    return sum(m - b for m, b in zip(mine, base)) / len(mine)


def local(d, pe, bucket, folder="runs", seed=0):
    return d.attention(runs(d, pe, folder, (seed,))[0], bucket)


ATTENTION_S4 = STUDY / "attention" / "rope_ctc_s4"  # RoPE seed 4 on the ladder's test pool (issue 48 point 7)


def rope_s4_attention(set_name: str, key: str = "local_mass") -> tuple[float, float, float, int]:
    """RoPE seed 4's attention statistic on one ladder set: `s4_attention`."""
    return s4_attention("rope", set_name, key)


def _uniform(run: str, sentence: str, uniform_words: str) -> list:
    """A model said to attend uniformly (``run``: its folder in study/attention/, e.g. ``none_ctc_s4``):
    the sentence's numbers at 160 s (mean distance of the recording's length, local share with CI)
    and on the 2-3 s utterances, and the words checked (mean distance within 0.02 of a third of the
    recording, as for uniform attention)."""
    def numbers(d):
        return [run_attention(run, "ladder_test_gap500ms_160", "mean_distance_s")[0],
                run_attention(run, "ladder_test_gap500ms_160", "duration")[0],
                *_pct(run_attention(run, "ladder_test_gap500ms_160"))[:3],
                *_pct(run_attention(run, "ladder_test_alone"))[:3]]

    def a_third(d):
        share = (run_attention(run, "ladder_test_gap500ms_160", "mean_distance_s")[0]
                 / run_attention(run, "ladder_test_gap500ms_160", "duration")[0])
        return [] if abs(share - 1 / 3) < 0.02 else [f"{run}'s mean distance at 160 s is {share:.3f} of the recording"]
    return [Claim(f"{run} at 160 s", sentence, numbers), Fact(f"{run}: a third, as uniform", uniform_words, a_third)]


def s4_attention(pe: str, set_name: str, key: str = "local_mass") -> tuple[float, float, float, int]:
    """A seed-4 model's attention statistic on one ladder set: `run_attention` of ``<pe>_ctc_s4``."""
    return run_attention(f"{pe}_ctc_s4", set_name, key)


@__import__("functools").cache
def _attention_rows(run: str) -> tuple[dict, ...]:
    """The rows of a run's attention_stats.csv in study/attention/ (read once per checker run)."""
    import csv

    from asr_pe.results_table import locate

    path = ATTENTION_S4.parent / run / "attention_stats.csv"
    if not path.is_file():
        path = locate(ATTENTION_S4.parent / run / "attention_stats" / "attention_stats.csv")
    with open(path, newline="") as f:
        return tuple(csv.DictReader(f))


def run_attention(run: str, set_name: str, key: str = "local_mass") -> tuple[float, float, float, int]:
    """A model's attention statistic on one ladder set (study/attention/<run>/attention_stats.csv, or
    for ``arms/<arm>/<run>`` the run's attention_stats/ in that arm's table, backlog.sh stage 5):
    the mean over the set's recordings (each its mean over layers and heads) with the 95 % CI
    resampling them, and how many recordings."""
    from asr_pe.evaluation.attention_vs_length import utterance_ci

    rows = [{"utt": r["utt"], key: float(r[key])} for r in _attention_rows(run) if r["test_set"] == set_name]
    per_utt: dict[str, list[float]] = {}
    for r in rows:
        per_utt.setdefault(r["utt"], []).append(r[key])
    mean = sum(sum(v) / len(v) for v in per_utt.values()) / len(per_utt)
    return (mean, *utterance_ci(rows, key), len(per_utt))


def _shares_by_rung(run: str) -> list[float]:
    """``run``'s local share (%) on the 2-3 s utterances (with CI), on the rungs of `ATTENTION_RUNGS`,
    and at 160 s (with CI), then its mean distance and the recording's length at 160 s."""
    long = "ladder_test_gap500ms_160"
    return [*_pct(run_attention(run, "ladder_test_alone"))[:3],
            *[100 * run_attention(run, f"ladder_test_gap500ms_{r}")[0] for r in ATTENTION_RUNGS],
            *_pct(run_attention(run, long))[:3], run_attention(run, long, "mean_distance_s")[0],
            run_attention(run, long, "duration")[0]]


def _local_and_distance(run: str, other: str) -> list[float]:
    """``run``'s local share (%, CI) on the 2-3 s utterances and at 160 s, its mean distance and the
    recording's length at 160 s, and ``other``'s mean distance there."""
    long = "ladder_test_gap500ms_160"
    return [*_pct(run_attention(run, "ladder_test_alone"))[:3], *_pct(run_attention(run, long))[:3],
            run_attention(run, long, "mean_distance_s")[0], run_attention(run, long, "duration")[0],
            run_attention(other, long, "mean_distance_s")[0]]


ATT_SETS = ("ladder_test_alone", *(f"ladder_test_gap500ms_{r}" for r in (5, 10, 20, 40, 80, 160)))  # alone, then each rung


def _local_by_length(run: str) -> list[float]:
    """A local model's sentence: its local share (%, with CI) on the 2-3 s utterances, on the 5 and 20 s
    rungs, with CI at 160 s, then its mean attended distance and the recording's length there (s)."""
    long = "ladder_test_gap500ms_160"
    return [*_pct(run_attention(run, "ladder_test_alone"))[:3], 100 * run_attention(run, "ladder_test_gap500ms_5")[0],
            100 * run_attention(run, "ladder_test_gap500ms_20")[0], *_pct(run_attention(run, long))[:3],
            run_attention(run, long, "mean_distance_s")[0], run_attention(run, long, "duration")[0]]


def _falls(run: str) -> list[str]:
    """Where ``run``'s local share does not fall from one of `ATT_SETS` to the next."""
    mine = [run_attention(run, s)[0] for s in ATT_SETS]
    return [f"{run} does not fall from {a} to {b}: {x:.3f} -> {y:.3f}"
            for a, b, x, y in zip(ATT_SETS, ATT_SETS[1:], mine, mine[1:]) if not y < x]


def _falls_below_s4(run: str) -> list[str]:
    """``run``'s local share falls from the 2-3 s utterances through every rung, and lies below RoPE
    seed 4's at each."""
    return _falls(run) + [f"{s}: {run} {run_attention(run, s)[0]:.3f} not below seed 4's {rope_s4_attention(s)[0]:.3f}"
                          for s in ATT_SETS if not run_attention(run, s)[0] < rope_s4_attention(s)[0]]


def _layer_local(run: str, set_name: str, layer: int) -> float:
    """``run``'s local share in one layer (0-based) on one ladder set: the mean over the set's recordings
    of their mean over that layer's heads."""
    per_utt: dict[str, list[float]] = {}
    for r in _attention_rows(run):
        if r["test_set"] == set_name and int(r["layer"]) == layer:
            per_utt.setdefault(r["utt"], []).append(float(r["local_mass"]))
    assert per_utt, f"{run}: no layer {layer} on {set_name}"
    return sum(sum(v) / len(v) for v in per_utt.values()) / len(per_utt)


def _apart_on_short(run: str, others: list[str]) -> list[str]:
    """Which of ``others`` have a CI of the local share on the 2-3 s utterances apart from ``run``'s."""
    mine = run_attention(run, "ladder_test_alone")
    return [f"CIs apart from {o}" for o in others
            if not ((x := run_attention(o, "ladder_test_alone"))[1] <= mine[2] and mine[1] <= x[2])]


def _conformer_story(seed: int) -> list[str]:
    """Where seed ``seed`` of the Conformer departs from its story: RoPE's and relative's local shares
    fall at every rung, `none`, sinusoidal and CAPE hold under 2 % at 160 s, relative is the most local
    (its CI above every other PE's) on every set."""
    run = f"arms/conformer/{{}}_ctc_s{seed}".format
    return (_falls(run("rope")) + _falls(run("relative"))
            + [f"{pe} s{seed}: not near uniform at 160 s" for pe in ("none", "sinusoidal", "cape")
               if run_attention(run(pe), "ladder_test_gap500ms_160")[0] > 0.02]
            + [f"{s} s{seed}: {o} not below relative" for s in ATT_SETS for o in ("none", "sinusoidal", "rope", "cape")
               if not run_attention(run(o), s)[2] < run_attention(run("relative"), s)[1]])


# arm 3's runs in study/attention/arms/ (backlog.sh stage 5)
A3R, A3N, A3S, A3C = (f"arms/frontend70/{pe}_ctc_s0" for pe in ("relative", "none", "sinusoidal", "cape"))
A3R1, A3N1, A3S1, A3C1 = (f"arms/frontend70/{pe}_ctc_s1" for pe in ("relative", "none", "sinusoidal", "cape"))
F70L_N, F70L_S, F70L_C = (f"{F70L}/{pe}_ctc_s0" for pe in ("none", "sinusoidal", "cape"))  # arm 3 at 3x the steps


def _arm3_against(pe: str, other: str, sentence: str) -> Claim:
    """An arm-3 run's sentence: ``other``'s local share (%) on the 2-3 s utterances, then what the
    three-utterance table of seed 0 said for ``pe`` at 2-4 s and 160 s."""
    return Claim(f"arm 3 {pe} s0: against {other}, and the three-utterance table", sentence,
                 lambda d: [100 * run_attention(other, "ladder_test_alone")[0], local(d, pe, "2-4", "arms/frontend70"),
                            local(d, pe, "128-256", "arms/frontend70")])


def _arm_retrained(arm: str, run: str) -> dict:
    """Stage 5's reproduction check of an arm run (study/attention/arms/<arm>/retrained.jsonl)."""
    import json
    for line in (ATTENTION_S4.parent / "arms" / arm / "retrained.jsonl").read_text().splitlines():
        if line.strip() and json.loads(line)["run"] == run:
            return json.loads(line)
    raise KeyError(f"{run} not in study/attention/arms/{arm}/retrained.jsonl")


def _at_160_then_short(words: str) -> str:
    """The numbers of `_uniform` in the compact order of arm 3 at 3x the steps: distance and local share
    at 160 s, ``words`` (which says how uniform), then the local share on the 2-3 s utterances."""
    return ("At 160 s: mean attended distance {} s of {} s (a third of the recording), local share {} % [{}, {}], "
            + words + ". On the 2-3 s utterances: {} % [{}, {}]")


def _another_sample(arm: str, run: str, header: str) -> list:
    """A retrained arm run that differs from its archived namesake (``header``: its bullet's bold name and
    date): the count of differing test hypotheses, of test utterances, the char errors (retrained,
    archived), and that it is not reproduced."""
    words = f"{header}, another sample of its recipe"
    return [Claim(f"{arm}/{run}: another sample", words + " (its test hypotheses differ from the archived run's in {} "
                  "of {}; {} char errors against {})",
                  lambda d: [(r := _arm_retrained(arm, run))["test"]["differing"], r["test"]["utterances"],
                             *r["test"]["char_errors"]]),
            Fact(f"{arm}/{run}: not reproduced", words,
                 lambda d: ["reproduced"] if _arm_retrained(arm, run)["reproduced"] else [])]


def _cape_between(seed: int, sentence: str, words: str) -> list:
    """CAPE of arm 3 at 3x the steps at ``seed``: `none`'s and sinusoidal's local shares (%) on the 2-3 s
    utterances at that seed, and that CAPE's CI there overlaps `none`'s and lies below sinusoidal's."""
    run = f"{F70L}/{{}}_ctc_s{seed}".format
    short = lambda pe: run_attention(run(pe), "ladder_test_alone")  # noqa: E731  (mean, low, high, n)
    return [Claim(f"arm 3 at 3x the steps, CAPE s{seed}: against none and sinusoidal", sentence,
                  lambda d: [100 * short(pe)[0] for pe in ("none", "sinusoidal")]),
            Fact(f"arm 3 at 3x the steps, CAPE s{seed}: like none, below sinusoidal", words,
                 lambda d: _apart_on_short(run("cape"), [run("none")])
                 + ([] if short("cape")[2] < short("sinusoidal")[1] else [f"not below sinusoidal s{seed}"]))]


def _rate_retrained(run: str) -> dict:
    """The rate lane's reproduction check of a retrained run (study/rate/retrained.jsonl)."""
    for record in _RATE["retrained_records"]():
        if record["run"] == run:
            return record
    raise KeyError(f"{run} not in study/rate/retrained.jsonl")


def _pct(stat):
    """(mean, low, high, n) of a share -> percentages, then n."""
    return [100 * stat[0], 100 * stat[1], 100 * stat[2], stat[3]]


def diff(d, pe, other, set_name, bucket=LONG, folder="runs", seeds=None):
    return list(d.difference(runs(d, pe, folder, seeds), runs(d, other, folder, seeds), set_name, bucket))


def gap(d, pe, bucket, set_name="test", folder="runs"):
    a, b = per_seed(d, pe, bucket, set_name, folder)
    return abs(a - b)


STUDY_PES = ("rope", "relative", "alibi", "rem", "t5", "conv", "shaw", "sinusoidal_sqrtd", "learned_wrap",
             "none", "sinusoidal", "cape")
CONFORMER_PES = ("none", "sinusoidal", "rope", "relative", "cape")
ARM70_PES = ("relative", "none", "sinusoidal", "cape")


def all_cells(d, pe, folder="runs"):
    """(bucket, mean CER) of every bucket of ``test`` and the long-form set."""
    out = [(b, cer(d, pe, b, folder=folder)) for b in TEST_BUCKETS]
    return out + [("160 s", long_(d, pe, folder=folder))]


# ---------------------------------------------------------------- facts

def _window_costs_nothing(d):
    """Inference remedies act past the training length only: 0-2 and 2-4 s unchanged."""
    bad = []
    for pe in ("rope", "t5", "shaw", "sinusoidal", "relative"):
        for suffix in ("_window", "_window10", "_chunked", "_logit_scale"):
            for b in ("0-2", "2-4"):
                if per_seed(d, pe, b, "test" + suffix) != per_seed(d, pe, b, "test"):
                    bad.append(f"{pe}{suffix} changes {b} s")
    return bad


def _logit_scale_worse_except_shaw(d):
    better = [pe for pe in ("rope", "sinusoidal", "t5", "relative", "shaw")
              if long_(d, pe, "_logit_scale") <= long_(d, pe)]
    return [] if better == ["shaw"] else [f"logit scale not worse at 160 s for {better}"]


def _below(a, b, what):
    return [] if a < b else [f"{what}: {a:.2f} is not below {b:.2f}"]


def _sin_concat_better_from_2s(d):
    bad = [b for b in TEST_BUCKETS[1:] if cer(d, "sinusoidal_concat", b, folder="remedies") >= cer(d, "sinusoidal", b)]
    bad += [] if long_(d, "sinusoidal_concat", folder="remedies") < long_(d, "sinusoidal") else ["160 s"]
    worse_first = cer(d, "sinusoidal_concat", "0-2", folder="remedies") > cer(d, "sinusoidal", "0-2")
    return [f"joined sinusoidal not better at {bad}"] if bad else ([] if worse_first else ["better at 0-2 s too"])


def _concat_best_rope_at_32(d):
    models = {"plain": cer(d, "rope", "32-64")} | {
        r: cer(d, f"rope_{r}", "32-64", folder="remedies") for r in ("posscale", "randpos", "concat")}
    best = min(models, key=models.get)
    return [] if best == "concat" else [f"best plainly decoded RoPE model at 32-64 s: {best}"]


def _test_sizes(d):
    bad = []
    for pe in STUDY_PES:
        for r in d.series(runs(d, pe), "test").runs:
            bad += [f"{r.run_dir.name} {row['bucket']}: {row['utterances']}" for row in r.rows
                    if row["bucket"] != LONG and row["utterances"] != 25]
        for r in d.series(runs(d, pe), "longform").runs:
            bad += [f"{r.run_dir.name} longform: {row['utterances']}" for row in r.rows
                    if row["bucket"] == LONG and row["utterances"] != 13]
    return bad


def _max_seed_gap_pes(d):
    """The largest seed gap in a bucket of test, to one decimal, and the PEs (at 0-2 s) having it."""
    gaps = {(pe, b): gap(d, pe, b) for pe in STUDY_PES for b in TEST_BUCKETS}
    top = max(gaps.values())
    at = sorted(pe for (pe, b), g in gaps.items() if round(g, 1) >= 1.4 and b == "0-2")
    bad = [] if round(top, 1) == 1.4 else [f"largest gap {top:.2f}"]
    return bad + ([] if at == ["conv", "shaw", "t5"] else [f"PEs at 0-2 s with ~1.5: {at}"])


def _rope_160_largest_gap(d):
    top = max(((gap(d, pe, b), pe, b) for pe in STUDY_PES for b in TEST_BUCKETS), default=(0,))
    longest = max(gap(d, pe, LONG, "longform") for pe in STUDY_PES if pe != "rope")
    rope = gap(d, "rope", LONG, "longform")
    return [] if rope > max(top[0], longest) else [f"RoPE's 160 s gap {rope:.2f} is not the largest"]


def _relative_best_from_8s(d):
    bad = []
    for b, v in all_cells(d, "relative")[3:]:
        best = min(STUDY_PES, key=lambda pe: dict(all_cells(d, pe))[b])
        if best != "relative":
            bad.append(f"{b}: {best} is more accurate")
    return bad


def _conformer_rope_drifts_most(d):
    """RoPE has the largest 160 s / 2-4 s ratio and the largest excess over `none` at 160 s."""
    top = max(CONFORMER_PES, key=lambda pe: ratio(d, pe, folder="arms/conformer"))
    excess = max(CONFORMER_PES, key=lambda pe: long_(d, pe, folder="arms/conformer"))
    return [] if top == excess == "rope" else [f"largest ratio: {top}, highest CER at 160 s: {excess}"]


def _cer_definition(d):
    """What scoring does: lowercase, collapse whitespace, count the spaces between words; a bucket
    pools Σ edits / Σ reference characters."""
    from asr_pe.evaluation.buckets import bucket_table
    from asr_pe.evaluation.scoring import score_record
    a = score_record("a", 1.0, "The  Cat ", "the cat")        # normalised alike: no edit
    b = score_record("b", 1.5, "ab cd", "abcd")               # the space between words is a character
    bad = [] if (a["char_errors"], a["ref_chars"]) == (0, 7) else [f"normalisation: {a}"]
    bad += [] if (b["char_errors"], b["ref_chars"]) == (1, 5) else [f"spaces: {b}"]
    row = bucket_table([a, b], [0, 2], n_boot=1)[0]
    return bad + ([] if abs(row["cer"] - 100 * 1 / 12) < 1e-9 else [f"pooling: {row['cer']}"])


def _conformer_beats_transformers(d):
    bad = []
    for pe in CONFORMER_PES:
        for b, v in all_cells(d, pe, "arms/conformer"):
            best = min(dict(all_cells(d, t))[b] for t in STUDY_PES)
            if v >= best:
                bad.append(f"{pe} at {b}: {v:.2f} against the best Transformer's {best:.2f}")
    return bad


def _conformer_paired_2_4(d):
    bad = []
    for pe in ("sinusoidal", "rope", "relative", "cape"):
        _, lo, hi = diff(d, pe, "none", "test", "2-4", "arms/conformer")
        if not lo <= 0 <= hi:
            bad.append(f"{pe} differs from none at 2-4 s [{lo:.2f}, {hi:.2f}]")
    return bad


def _conformer_ratio_cis(d):
    """Which Conformer ratio CIs exclude 1 (the sentence names RoPE's only)."""
    out = sorted(pe for pe in CONFORMER_PES if not ratio_ci(d, pe, "arms/conformer")[1] <= 1
                 <= ratio_ci(d, pe, "arms/conformer")[2])
    return [] if out == ["rope"] else [f"ratio CIs excluding 1: {out}"]


def _sin3x_worst_from_8s(d):
    f = "arms/frontend70_long"
    bad = []
    for b in ("8-16", "16-32", "32-64", LONG):
        s = "longform" if b == LONG else "test"
        v = {pe: cer(d, pe, b, s, f) for pe in ("none", "sinusoidal", "cape")}
        if max(v, key=v.get) != "sinusoidal":
            bad.append(f"{b}: sinusoidal not the worst")
    v = {pe: cer(d, pe, "2-4", "test", f) for pe in ("none", "sinusoidal", "cape")}
    return bad + ([] if min(v, key=v.get) == "sinusoidal" else ["sinusoidal not the best at 2-4 s"])


def _plain_within_remedy_ci(d):
    """The plain model's 160 s CER lies inside the remedy's CI (the seed mean of its bounds, as printed)."""
    bad = []
    for pe, suffix in (("sinusoidal", "_window"), ("sinusoidal", "_chunked"), ("relative", "_window")):
        s = d.series(runs(d, pe), "longform" + suffix)
        if not s.ci_low[LONG] <= long_(d, pe) <= s.ci_high[LONG]:
            bad.append(f"{pe}{suffix}: plain {long_(d, pe):.2f} outside [{s.ci_low[LONG]:.2f}, {s.ci_high[LONG]:.2f}]")
    return bad


def _randpos_rope(d):
    r160, r32 = long_(d, "rope_randpos", folder="remedies"), cer(d, "rope_randpos", "32-64", folder="remedies")
    bad = [] if r160 >= 0.8 * long_(d, "rope") else [f"randomized positions cut the 160 s CER to {r160:.2f}"]
    return bad + ([] if r32 > cer(d, "rope", "32-64") else ["randomized positions not worse at 32-64 s"])


def _sin_training_remedies_help(d):
    return [r for r in ("posscale", "randpos", "concat")
            if long_(d, f"sinusoidal_{r}", folder="remedies") >= long_(d, "sinusoidal")]


def _window_is_best_for_rope(d):
    best = long_(d, "rope", "_window")
    others = {n: long_(d, "rope", s) for n, s in ROPE_DECODINGS.items() if n != "window"}
    others |= {f"{r}{s}": long_(d, f"rope_{r}", s, folder="remedies")
               for r in ("posscale", "randpos", "concat") for s in ("", "_window")}
    return [f"{n}: {v:.2f} at 160 s, the window {best:.2f}" for n, v in others.items() if v <= best]


def _rem_not_distributions(d):
    """REM's archived attention statistics are refused as not of distributions (a share outside [0, 1])."""
    from asr_pe.errors import NotDistributions
    try:
        local(d, "rem", "128-256")
    except NotDistributions:
        return []
    return ["REM's attention statistics read as distributions"]


def _attend_uniformly(d):
    """Local share near chance at 2-4 s and below 0.05 past it; mean distance about a third of the input."""
    bad = []
    for pe in ("none", "cape", "conv", "learned_wrap", "sinusoidal"):
        if local(d, pe, "2-4") > 0.40 or max(local(d, pe, b) for b in ("32-64", "128-256")) > 0.05:
            bad.append(f"{pe}: local share {local(d, pe, '2-4'):.2f} at 2-4 s")
        fracs = [d.attention(runs(d, pe, seeds=(0,))[0], b, "distance_frac") for b in ("32-64", "128-256")]
        if not all(0.3 <= f <= 0.36 for f in fracs):
            bad.append(f"{pe}: distance {fracs} of the input")
    return bad


def _more_steps_help(d):
    return [f"{pe} at {b}" for pe in ("none", "sinusoidal", "cape") for b, s in (("2-4", "test"), (LONG, "longform"))
            if cer(d, pe, b, s, "arms/frontend70_long") >= cer(d, pe, b, s, "arms/frontend70")]


# ---------------------------------------------------------------- RESULTS.md

def _rope_row(d, pe, folder="remedies", plain=False):
    """A row of the training-remedies table: 2-4 s (s0, s1), 32-64, 160 s (s0, s1), + window, cost."""
    kw = {} if plain else {"folder": folder}
    out = [cer(d, pe, **kw), *per_seed(d, pe, **kw), cer(d, pe, "32-64", **kw), long_(d, pe, **kw),
           *per_seed(d, pe, LONG, "longform", **kw), long_(d, pe, "_window", **kw)]
    return out + ([] if plain else [cost(d, pe)])


def _conformer_row(d, pe):
    f = "arms/conformer"
    out = [cer(d, pe, folder=f), *per_seed(d, pe, folder=f), cer(d, pe, "32-64", folder=f), long_(d, pe, folder=f),
           *per_seed(d, pe, LONG, "longform", f), *ratio_ci(d, pe, f)]
    if pe != "none":
        out += diff(d, pe, "none", "longform", folder=f)
    return out + [*_arm_local("conformer", pe), *trio(d, pe)]


def _arm70_row(d, pe):
    f = "arms/frontend70"
    return [cer(d, pe, folder=f), *per_seed(d, pe, folder=f), cer(d, pe, "32-64", folder=f), long_(d, pe, folder=f),
            *per_seed(d, pe, LONG, "longform", f), *ratio_ci(d, pe, f), *_arm_local("frontend70", pe)]


def _arm_local(arm, pe, seeds=(0,)):
    """An arm's local share on the ladder's 2-3 s test utterances and its 160 s rung (stage 5's
    measurement over the ladder's test pool, study/attention/arms/<arm>/), the mean over ``seeds``."""
    return [_seed_mean(lambda s, set_name=set_name: run_attention(f"arms/{arm}/{pe}_ctc_s{s}", set_name)[0], seeds)
            for set_name in ("ladder_test_alone", "ladder_test_gap500ms_160")]


def _seed_mean(value, seeds) -> float:
    """The mean of ``value(seed)`` over ``seeds``: every seed is measured on the same utterances, so
    this is also the mean over utterances of each utterance's mean over the seeds."""
    return sum(value(s) for s in seeds) / len(seeds)


def _arm3x_row(d, pe):
    f = F70L
    c = in_ctx(d, pe, f)
    out = [cer(d, pe, folder=f), *per_seed(d, pe, folder=f), cer(d, pe, "32-64", folder=f), long_(d, pe, folder=f),
           *per_seed(d, pe, LONG, "longform", f), c.ratio, c.ci_low, c.ci_high]
    if pe != "none":
        out += diff(d, pe, "none", "test", "2-4", f) + diff(d, pe, "none", "longform", LONG, f)
    return out + _arm_local("frontend70_long", pe, FOLDER_SEEDS[F70L])


def _cape_row(d, folder):
    return [cer(d, "cape", "0-2", folder=folder), *per_seed(d, "cape", "0-2", folder=folder),
            cer(d, "cape", folder=folder), *per_seed(d, "cape", folder=folder),
            cer(d, "cape", "32-64", folder=folder), *per_seed(d, "cape", "32-64", folder=folder),
            long_(d, "cape", folder=folder), *per_seed(d, "cape", LONG, "longform", folder),
            *ratio_ci(d, "cape", folder), local(d, "cape", "128-256", folder)]


def _hybrid(d, pe, set_name, bucket):
    return cer(d, pe, bucket, set_name, seeds=(0,), head="hybrid")


def _minmax(values):
    values = list(values)
    return [min(values), max(values)]


CLAIMS = [
    Fact("CER definition", "Σ character edits / Σ reference characters over a bucket or set, after lowercasing and\n"
         "collapsing whitespace, spaces between words counted", _cer_definition),
    # in-context ratio
    Claim("in-context headline",
          "only RoPE degrades badly at 160 s ({}× [{}, {}]); Shaw ({}×), "
          "sinusoidal ({}×) and T5 ({}×) degrade a little; every other PE is within {}× of its own short decodings",
          lambda d: [in_ctx(d, "rope").ratio, in_ctx(d, "rope").ci_low, in_ctx(d, "rope").ci_high,
                     in_ctx(d, "shaw").ratio, in_ctx(d, "sinusoidal").ratio, in_ctx(d, "t5").ratio,
                     max(in_ctx(d, pe).ratio for pe in STUDY_PES if pe not in ("rope", "shaw", "sinusoidal", "t5"))]),
    Claim("in-context against the cross-set ratio",
          "RoPE's parts alone already score {} % against its {} % at 2-4 s, and the old {}× falls to {}× once the "
          "content is the same; for T5 the old {}× becomes {}×, for sinusoidal {}× becomes {}×",
          lambda d: [in_ctx(d, "rope").alone, cer(d, "rope"), ratio(d, "rope"), in_ctx(d, "rope").ratio,
                     ratio(d, "t5"), in_ctx(d, "t5").ratio, ratio(d, "sinusoidal"), in_ctx(d, "sinusoidal").ratio]),
    Claim("in-context over every seed",
          "over seeds 0-4: RoPE {}× [{}, {}], "
          "sinusoidal {}×, CAPE {}×, relative {}×, `none` {}×",
          lambda d: [in_ctx(d, "rope", "seeds", SEEDS["rope"]).ratio, in_ctx(d, "rope", "seeds", SEEDS["rope"]).ci_low,
                     in_ctx(d, "rope", "seeds", SEEDS["rope"]).ci_high,
                     *(in_ctx(d, pe, "seeds", SEEDS[pe]).ratio for pe in ("sinusoidal", "cape", "relative", "none"))]),
    # remedies
    Claim("window on RoPE",
          "takes RoPE from {} % to {} % CER at 160 s (seeds {} → {} and {} → {} %; {}× its 2-4 s CER instead of {}×)",
          lambda d: [long_(d, "rope"), long_(d, "rope", "_window"), per_seed(d, "rope", LONG, "longform")[0],
                     per_seed(d, "rope", LONG, "longform_window")[0], per_seed(d, "rope", LONG, "longform")[1],
                     per_seed(d, "rope", LONG, "longform_window")[1], ratio(d, "rope", "_window"), ratio(d, "rope")]),
    Fact("inference remedies cost nothing at 0-4 s", "costs nothing inside the training lengths", _window_costs_nothing),
    Claim("RoPE rescalings",
          "NTK-aware scaling changes little ({} %), YaRN and position interpolation make it worse ({} %, {} %), "
          "and so does a length-aware logit scale ({} %). Overlapping chunked inference (20 s chunks, 4 s context) "
          "gets {} %",
          lambda d: [long_(d, "rope", s) for s in ("_rope_ntk", "_rope_yarn", "_rope_pi", "_logit_scale", "_chunked")]),
    Claim("joined inputs, RoPE",
          "joined inputs bring RoPE to {} % at 160 s but cost {} points at 2-4 s.",
          lambda d: [long_(d, "rope_concat", folder="remedies"), cost(d, "rope_concat")]),
    Claim("recommended remedy: rope",
          "| rope | `eval.remedy=window` | {} | {} → **{} %** (32-64 s: {} → {} %); `window:10` {} %, chunked {} % |",
          lambda d: [cost(d, "rope", folder="runs", suffix="_window"), long_(d, "rope"), long_(d, "rope", "_window"),
                     cer(d, "rope", "32-64"), cer(d, "rope", "32-64", "test_window"), long_(d, "rope", "_window10"),
                     long_(d, "rope", "_chunked")]),
    Claim("recommended remedy: shaw",
          "| shaw | `eval.remedy=window` | {} | {} → {} % (below its 2-4 s CER, {} %) |",
          lambda d: [cost(d, "shaw", folder="runs", suffix="_window"), long_(d, "shaw"), long_(d, "shaw", "_window"),
                     cer(d, "shaw")]),
    Fact("shaw windowed below its 2-4 s CER", "(below its 2-4 s CER",
         lambda d: _below(long_(d, "shaw", "_window"), cer(d, "shaw"), "Shaw windowed at 160 s")),
    Claim("recommended remedy: t5",
          "| t5 | `eval.remedy=window` | {} | {} → {} % (32-64 s: {} → {} %) |",
          lambda d: [cost(d, "t5", folder="runs", suffix="_window"), long_(d, "t5"), long_(d, "t5", "_window"),
                     cer(d, "t5", "32-64"), cer(d, "t5", "32-64", "test_window")]),
    Claim("recommended remedy: sinusoidal",
          "| 0; joined {} | {} → {} % (chunked {} %); joined {} % |",
          lambda d: [cost(d, "sinusoidal_concat"), long_(d, "sinusoidal"), long_(d, "sinusoidal", "_window"),
                     long_(d, "sinusoidal", "_chunked"), long_(d, "sinusoidal_concat", folder="remedies")]),
    Fact("remedy not needed: within the CI", "here `window` and chunked are within the plain CI", _plain_within_remedy_ci),
    Claim("recommended remedy: relative",
          "| relative | none needed (flat: within the CI) | {} | {} → {} % |",
          lambda d: [cost(d, "relative", folder="runs", suffix="_window"), long_(d, "relative"),
                     long_(d, "relative", "_window")]),
    Claim("logit scale",
          "(RoPE {}, sinusoidal {}, T5 {}, relative {} %; Shaw {} against {} %)",
          lambda d: [long_(d, pe, "_logit_scale") for pe in ("rope", "sinusoidal", "t5", "relative", "shaw")]
          + [long_(d, "shaw")]),
    Fact("logit scale worse for all but Shaw", "Length-aware logit scaling makes every PE but Shaw worse at 160 s",
         _logit_scale_worse_except_shaw),
    Claim("RoPE's eight decodings, ratios",
          "(RoPE's eight decodings: window {}×, `window:10` {}×, chunked {}×, NTK {}×, plain {}×, logit scale {}×, "
          "YaRN {}×, position interpolation {}× its 2-4 s CER at 160 s)",
          lambda d: [ratio(d, "rope", ROPE_DECODINGS[n]) for n in
                     ("window", "window:10", "chunked", "NTK", "plain", "logit scale", "YaRN", "position interpolation")]),
    Claim("RoPE attention",
          "seeds 4 and 3: {} % and {} % of its attention within ±0.5 s on the ladder's 160 s rung against {} % and {} % "
          "at 2-3 s",
          lambda d: [100 * run_attention(f"rope_ctc_s{s}", set_name)[0]
                     for set_name in ("ladder_test_gap500ms_160", "ladder_test_alone") for s in (4, 3)]),
    # the demo (make demo, its default threads=1, archived in study/demo)
    Claim("demo",
          "test CER {} / {} / {} / {} / {} / {} % at 0-2 … 32-64 s, all {} %",
          lambda d: [cer(d, "rope", b, "test", folder="demo", seeds=(0,)) for b in (*TEST_BUCKETS, "all")]),
    Fact("dev choices of Shaw and T5 on the ladder", "for Shaw and T5 too (seeds 0-1 so far",
         lambda d: _more_pes_chose_window(d)),
    # training remedies
    Claim("training remedies: rope plain",
          "| rope | (plain) | {} ({}, {}) | {} | {} ({}, {}) | **{}** | 0 |",
          lambda d: _rope_row(d, "rope", plain=True)),
    Claim("training remedies: rope posscale",
          "| rope | position scaling ×[1, 32] | {} ({}, {}) | {} | {} ({}, {}) | {} | {} |",
          lambda d: _rope_row(d, "rope_posscale")),
    Claim("training remedies: rope randpos",
          "| rope | randomized positions, 200 s | {} ({}, {}) | {} | {} ({}, {}) | {} | {} |",
          lambda d: _rope_row(d, "rope_randpos")),
    Claim("training remedies: rope concat",
          "| rope | inputs joined to ≤ 20 s | {} ({}, {}) | {} | {} ({}, {}) | {} | {} |",
          lambda d: _rope_row(d, "rope_concat")),
    Claim("training remedies: sinusoidal plain",
          "| sinusoidal | (plain) | {} ({}, {}) | {} | {} ({}, {}) | {} | 0 |",
          lambda d: _rope_row(d, "sinusoidal", plain=True)),
    Claim("training remedies: sinusoidal posscale",
          "| sinusoidal | position scaling ×[1, 32] | {} ({}, {}) | {} | {} ({}, {}) | {} | {} |",
          lambda d: _rope_row(d, "sinusoidal_posscale")),
    Claim("training remedies: sinusoidal randpos",
          "| sinusoidal | randomized positions, 200 s | {} ({}, {}) | {} | {} ({}, {}) | {} | {} |",
          lambda d: _rope_row(d, "sinusoidal_randpos")),
    Claim("training remedies: sinusoidal concat",
          "| sinusoidal | inputs joined to ≤ 20 s | {} ({}, {}) | {} | {} ({}, {}) | {} | {} |",
          lambda d: _rope_row(d, "sinusoidal_concat")),
    Claim("joined RoPE",
          "remedy that brings RoPE near its short CER: {} % at 160 s, {}× [{}, {}] its 2-4 s CER (both seeds, {} and "
          "{} %; in context {}× [{}, {}]), and the best RoPE model at 32-64 s ({} %); but it costs {} points at 2-4 s "
          "({} against {} %)",
          lambda d: [long_(d, "rope_concat", folder="remedies"), *ratio_ci(d, "rope_concat", "remedies"),
                     *per_seed(d, "rope_concat", LONG, "longform", "remedies"),
                     *(lambda p: [p.ratio, p.ci_low, p.ci_high])(in_ctx(d, "rope_concat", "remedies")),
                     cer(d, "rope_concat", "32-64", folder="remedies"), cost(d, "rope_concat"),
                     cer(d, "rope_concat", folder="remedies"), cer(d, "rope")]),
    Fact("joined RoPE: best plainly decoded RoPE model at 32-64 s", "the best RoPE model at 32-64 s",
         _concat_best_rope_at_32),
    Claim("posscale and randpos, RoPE",
          "Position scaling halves RoPE's long-input error ({} → {} %) at a cost of {} points; randomized positions "
          "hardly help at 160 s, are worse at 32-64 s and cost {} points.",
          lambda d: [long_(d, "rope"), long_(d, "rope_posscale", folder="remedies"), cost(d, "rope_posscale"),
                     cost(d, "rope_randpos")]),
    Fact("randomized positions, RoPE", "randomized positions hardly help at 160 s, are worse at 32-64 s", _randpos_rope),
    Fact("window the best RoPE decoding at 160 s", "The inference window on the plain RoPE model stays the answer",
         _window_is_best_for_rope),
    Fact("sinusoidal: every training remedy helps at 160 s", "Sinusoidal gains from every training remedy",
         _sin_training_remedies_help),
    Claim("window stays the answer",
          "stays the answer ({} %, cost {}); on the joined model it gives {} %.",
          lambda d: [long_(d, "rope", "_window"), cost(d, "rope", folder="runs", suffix="_window"),
                     long_(d, "rope_concat", "_window", folder="remedies")]),
    Claim("sinusoidal training remedies",
          "joined inputs are better at every length from 2 s ({} points at 2-4 s, {} % at 160 s; at 0-2 s {} against "
          "{} %), position scaling and randomized positions cut the 160 s CER by about a point at no cost ({}, {} %)",
          lambda d: [cost(d, "sinusoidal_concat"), long_(d, "sinusoidal_concat", folder="remedies"),
                     cer(d, "sinusoidal_concat", "0-2", folder="remedies"), cer(d, "sinusoidal", "0-2"),
                     long_(d, "sinusoidal_posscale", folder="remedies"),
                     long_(d, "sinusoidal_randpos", folder="remedies")]),
    Fact("joined sinusoidal better from 2 s", "joined inputs are better at every length from 2 s",
         _sin_concat_better_from_2s),
    # the length study
    Fact("test and long-form sizes", "(25 utterances per bucket up to 64 s) and on 13 long-form recordings",
         _test_sizes),
    Claim("long-form duration", "13 long-form recordings of ≈ {} s",
          lambda d: [round(d.series(runs(d, "rope"), "longform").mean_duration[LONG], -1)]),   # to 10 s, as printed
    Claim("short lengths", "per seed {}–{} % CER at 0-4 s",
          lambda d: _minmax(v for pe in STUDY_PES for b in ("0-2", "2-4") for v in per_seed(d, pe, b))),
    Claim("seed gap in test", "seeds of a PE differ by at most {} points in any bucket of `test` (T5, Shaw, conv at 0-2 s)",
          lambda d: [max(gap(d, pe, b) for pe in STUDY_PES for b in TEST_BUCKETS)]),
    Fact("seed gap in test: which", "(T5, Shaw, conv at 0-2 s)", _max_seed_gap_pes),
    Claim("seed gap RoPE 160 s", "the largest seed gap is RoPE at 160 s ({} and {} %)",
          lambda d: per_seed(d, "rope", LONG, "longform")),
    Fact("seed gap RoPE 160 s is the largest", "the largest seed gap is RoPE at 160 s", _rope_160_largest_gap),
    Claim("RoPE fails",
          "among the most accurate up to 4 s ({} % at 2-4 s), {} % at 32-64 s and {} % at 160 s (WER {} → {} → {} %): "
          "{}× / {}× [{}, {}], the only ratio far from 1",
          lambda d: [*trio(d, "rope"), cer(d, "rope", metric="wer"), cer(d, "rope", "32-64", metric="wer"),
                     d.value(runs(d, "rope"), "longform", LONG, "wer"), cer(d, "rope", "32-64") / cer(d, "rope"),
                     *ratio_ci(d, "rope")]),
    Claim("RoPE attention spreads",
          "local at training lengths ({} %\n  within ±0.5 s at 2-4 s) and spreads out on long inputs ({} % on the ladder's "
          "40 s rung, {} %\n  on its 160 s rung, mean distance {} s of {} s, a third of the recording; seed 4, {}-{}\n  "
          "recordings per rung",
          lambda d: [100 * rope_s4_attention("ladder_test_alone")[0], 100 * rope_s4_attention("ladder_test_gap500ms_40")[0],
                     100 * rope_s4_attention("ladder_test_gap500ms_160")[0],
                     rope_s4_attention("ladder_test_gap500ms_160", "mean_distance_s")[0],
                     rope_s4_attention("ladder_test_gap500ms_160", "duration")[0],
                     rope_s4_attention("ladder_test_gap500ms_160")[3], rope_s4_attention("ladder_test_alone")[3]]),
    Claim("mild drifts in context",
          "Shaw {}× [{}, {}] (flat to 64 s, then up: {} → {} %), sinusoidal {}× [{}, {}] ({} → {} → {} %), both above `none` "
          "(+{} [+{}, +{}] and +{} [+{}, +{}], paired); T5 {}× [{}, {}] ({} → {} → {} %) and CAPE {}×, not distinguishable "
          "from `none` ({}×; paired CIs include 0); √D sinusoidal {}×, conv {}×.",
          lambda d: [*_ic(d, "shaw"), cer(d, "shaw", "32-64"), long_(d, "shaw"), *_ic(d, "sinusoidal"),
                     *trio(d, "sinusoidal"), *icdiff(d, "shaw", "none"), *icdiff(d, "sinusoidal", "none"), *_ic(d, "t5"),
                     *trio(d, "t5"), in_ctx(d, "cape").ratio, in_ctx(d, "none").ratio,
                     in_ctx(d, "sinusoidal_sqrtd").ratio, in_ctx(d, "conv").ratio]),
    Fact("mild drifts: which are above none, paired", "both above `none`",
         lambda d: supports("degrades more", icdiff(d, "shaw", "none"), "Shaw")
         + supports("degrades more", icdiff(d, "sinusoidal", "none"), "sinusoidal")),
    Fact("mild drifts: T5 and CAPE like none, paired", "not distinguishable from `none`",
         lambda d: supports("like", icdiff(d, "t5", "none"), "T5") + supports("like", icdiff(d, "cape", "none"), "CAPE")),
    Fact("mild drifts: the order", "The mild drifts, ranked in context",
         lambda d: [] if sorted((pe for pe in STUDY_PES if pe != "rope"), key=lambda pe: -in_ctx(d, pe).ratio)[:4]
         == ["shaw", "sinusoidal", "t5", "cape"] else ["the four largest in-context ratios after RoPE are not Shaw, "
                                                      "sinusoidal, T5, CAPE"]),
    Claim("relative flat", "Relative is flat and the most accurate model from 8 s on** ({} → {} → {} %",
          lambda d: trio(d, "relative")),
    Fact("relative the most accurate from 8 s", "Relative is flat and the most accurate model from 8 s on", _relative_best_from_8s),
    Claim("ALiBi, REM, none, learned, CAPE hold",
          "ALiBi and REM are flat at {}–{} %; `none`, learned and CAPE hold at {}–{} % ({}–{}×)",
          lambda d: [*_minmax(v for pe in ("alibi", "rem") for v in trio(d, pe)),
                     *_minmax(v for pe in ("none", "learned_wrap", "cape") for v in trio(d, pe)),
                     *_minmax(ratio(d, pe) for pe in ("none", "learned_wrap", "cape"))]),
    Claim("local shares at 160 s", "keep a large local share at every length (at 160 s: relative {} % [{}, {}], "
          "seed 4; ALiBi {} % [{}, {}], seed 0; REM's weights: not distributions)",
          lambda d: [*_pct(s4_attention("relative", "ladder_test_gap500ms_160"))[:3],
                     *_pct(run_attention("alibi_ctc_s0", "ladder_test_gap500ms_160"))[:3]]),
    Fact("REM's attention statistics are not of distributions", "REM's weights: not distributions",
         _rem_not_distributions),
    Fact("uniform attention", "`none`, CAPE, conv and learned — and sinusoidal — attend uniformly at every length",
         _attend_uniformly),
    Claim("CAPE against none",
          "CAPE holds no better than `none` (in context +{} [{}, +{}], paired; over seeds 0-4 slightly worse, +{} [+{}, "
          "+{}]) and is not more accurate than it ({} / {} % at 2-4 / 160 s against {} / {} %)",
          lambda d: [*icdiff(d, "cape", "none"), *icdiff(d, "cape", "none", "seeds", S0_4),
                     cer(d, "cape"), long_(d, "cape"), cer(d, "none"), long_(d, "none")]),
    Fact("CAPE against none, paired", "CAPE holds no better than `none`",
         lambda d: supports("no better", icdiff(d, "cape", "none"), "in context, seeds 0, 1")
         + supports("degrades more", icdiff(d, "cape", "none", "seeds", S0_4), "in context, seeds 0-4")
         + supports("not more accurate", diff(d, "cape", "none", "test", "2-4"), "2-4 s")
         + supports("not more accurate", diff(d, "cape", "none", "longform"), "160 s")),
    Claim("sinusoidal drift at 32x", "whose drift is {}× at 32× the training length",
          lambda d: [ratio(d, "sinusoidal")]),
    Claim("mild drifts", "the mild drifts ({}–{}×) from one another only loosely",
          lambda d: _minmax(ratio(d, pe) for pe in STUDY_PES if pe != "rope")),
    # CAPE covered
    Claim("CAPE default row", "| paper's default (±30 s) | {} ({}, {}) | {} ({}, {}) | {} ({}, {}) | {} ({}, {}) | "
          "{}× [{}, {}] | {} |", lambda d: _cape_row(d, "runs")),
    Claim("CAPE covered row", "| covered (±80 s) | {} ({}, {}) | {} ({}, {}) | {} ({}, {}) | {} ({}, {}) | "
          "{}× [{}, {}] | {} |", lambda d: _cape_row(d, "arms/cape_wide")),
    Claim("CAPE: positions of the long recordings", "while the 160 s recordings reach ±{} s",
          lambda d: [max(r.duration for r in in_ctx(d, "cape").rows) / 2]),
    Claim("none like CAPE", "like `none` ({} → {} → {} %): in this regime", lambda d: trio(d, "none")),
    # the rescalings fine-tuned to 160 s: claims_finetune160.py's FINETUNE160_RESULTS_CLAIMS
    Claim("fine-tune control",
          "the ±5 s window is the best decoding of each model: {} % on the model as trained, but {} % on the plain "
          "fine-tune and {} % on the continuation control",
          lambda d: [ftc(d, n, LONG, suffix="_window5") for n in ("source_rope", "rope_finetune300", "rope_shortft300")]),
    Claim("fine-tune control: the extra steps help the window",
          "so the extra steps still help ({} [{}, {}] and {} [{}, {}] points against the model as trained, paired;",
          lambda d: ftdiff(d, "rope_finetune300", "source_rope", "longform_window5")
          + ftdiff(d, "rope_shortft300", "source_rope", "longform_window5")),
    Fact("fine-tune control: the extra steps help, paired", "so the extra steps still help",
         lambda d: supports("better", ftdiff(d, "rope_finetune300", "source_rope", "longform_window5"), "fine-tune")
         + supports("better", ftdiff(d, "rope_shortft300", "source_rope", "longform_window5"), "continuation")),
    Fact("fine-tune control: the window the best decoding of each", "the ±5 s window is the best decoding of each",
         lambda d: _ft_window_best(d)),
    Claim("fine-tune control: yardstick",
          "RoPE trained from scratch on ≤ 40 s inputs: seeds 2-4 {} % at 160 s, {}× in context, {} % at 2-4 s.",
          lambda d: [ftc(d, "rope_yardstick40", LONG), ftic(d, "rope_yardstick40").ratio,
                     ftc(d, "rope_yardstick40", "2-4")]),
    # 70 ms front end
    Claim("70 ms: answer",
          "only the relative PE makes attention carry it within the study's budget ({} % at 2-4 s; sinusoidal, CAPE "
          "and `none` {}–{} %)",
          lambda d: [cer(d, "relative", folder="arms/frontend70"),
                     *_minmax(cer(d, pe, folder="arms/frontend70") for pe in ("sinusoidal", "cape", "none"))]),
    Claim("70 ms 3x: answer",
          "describes ({} → {} %, {}× in context); CAPE avoids it only by not learning positions at all ({} → {} %, "
          "attention like `none`'s, no better than `none`)",
          lambda d: [cer(d, "sinusoidal", folder=F70L), long_(d, "sinusoidal", folder=F70L),
                     in_ctx(d, "sinusoidal", F70L).ratio, cer(d, "cape", folder=F70L), long_(d, "cape", folder=F70L)]),
    Claim("390 ms rows",
          "the 390 ms rows are the study's (relative {} / {}, `none` {} / {}, sinusoidal {} / {}, CAPE {} / {} % at "
          "2-4 s / 160 s)",
          lambda d: [v for pe in ARM70_PES for v in (cer(d, pe), long_(d, pe))]),
    Claim("70 ms: relative row", "| relative | 70 ms | **{}** ({}, {}) | **{}** | **{}** ({}, {}) | {}× [{}, {}] | {} / {} |",
          lambda d: _arm70_row(d, "relative")),
    Claim("70 ms: none row", "| none | 70 ms | {} ({}, {}) | {} | {} ({}, {}) | {}× [{}, {}] | {} / {} |",
          lambda d: _arm70_row(d, "none")),
    Claim("70 ms: sinusoidal row", "| sinusoidal | 70 ms | {} ({}, {}) | {} | {} ({}, {}) | {}× [{}, {}] | {} / {} |",
          lambda d: _arm70_row(d, "sinusoidal")),
    Claim("70 ms: CAPE row", "| CAPE | 70 ms | {} ({}, {}) | {} | {} ({}, {}) | {}× [{}, {}] | {} / {} |",
          lambda d: _arm70_row(d, "cape")),
    Claim("70 ms: degradation",
          "sinusoidal degrades with length ({} → {} %, {}× [{}, {}]; `none` {}× [{}, {}]) and CAPE hardly does ({}× "
          "[{}, {}])",
          lambda d: [cer(d, "sinusoidal", folder="arms/frontend70"), long_(d, "sinusoidal", folder="arms/frontend70"),
                     *ratio_ci(d, "sinusoidal", "arms/frontend70"), *ratio_ci(d, "none", "arms/frontend70"),
                     *ratio_ci(d, "cape", "arms/frontend70")]),
    Claim("70 ms: accuracy",
          "CAPE is {}× worse than relative and worse than `none` (paired, `--compare-to none`: {} points [{}, {}] at "
          "2-4 s, {} [{}, {}] at 160 s)",
          lambda d: [cer(d, "cape", folder="arms/frontend70") / cer(d, "relative", folder="arms/frontend70"),
                     *diff(d, "cape", "none", "test", "2-4", "arms/frontend70"),
                     *diff(d, "cape", "none", "longform", LONG, "arms/frontend70")]),
    Claim("70 ms: local shares", "(local share {}, {} at 2-3 s; `none` {}; as in v1, History), while relative did ({})",
          lambda d: [_arm_local("frontend70", pe)[0] for pe in ("sinusoidal", "cape", "none", "relative")]),
    Fact("70 ms 3x: more steps help", "more steps help every model", _more_steps_help),
    Claim("70 ms 3x: none row", "| none | {} ({}, {}, {}) | {} | {} ({}, {}, {}) | {}× [{}, {}] | – | {} / {} |",
          lambda d: _arm3x_row(d, "none")),
    Claim("70 ms 3x: sinusoidal row",
          "| sinusoidal | **{}** ({}, {}, {}) | {} | {} ({}, {}, {}) | {}× [{}, {}] | {} [{}, {}] / {} [{}, {}] | {} / {} |",
          lambda d: _arm3x_row(d, "sinusoidal")),
    Claim("70 ms 3x: CAPE row", "| CAPE | {} ({}, {}, {}) | {} | {} ({}, {}, {}) | {}× [{}, {}] | {} [{}, {}] / {} [{}, {}] | {} / {} |",
          lambda d: _arm3x_row(d, "cape")),
    Claim("70 ms 3x: sinusoidal uses position", "Sinusoidal now uses position (local share {}; layers 4–6 at {}–{})",
          lambda d: [_arm_local("frontend70_long", "sinusoidal", FOLDER_SEEDS[F70L])[0],
                     *_minmax(_seed_mean(lambda s, layer=layer: _layer_local(f"{F70L}/sinusoidal_ctc_s{s}", "ladder_test_alone",
                                                                             layer), FOLDER_SEEDS[F70L])
                              for layer in (3, 4, 5))]),
    Claim("70 ms 3x: then loses it", "then loses it past them ({} at 40 s)",
          lambda d: [_seed_mean(lambda s: run_attention(f"{F70L}/sinusoidal_ctc_s{s}", "ladder_test_gap500ms_40")[0],
                                FOLDER_SEEDS[F70L])]),
    Fact("70 ms 3x: sinusoidal best inside, worst from 8 s", "worst at every length from 8 s", _sin3x_worst_from_8s),
    Claim("70 ms 3x: CAPE like none", "CAPE's flat curve is `none`'s (local {} against {}, CIs overlap at each seed)",
          lambda d: [_arm_local("frontend70_long", pe, FOLDER_SEEDS[F70L])[0] for pe in ("cape", "none")]),
    Fact("70 ms 3x: CAPE's local share overlaps none's at each seed", "CIs overlap at each seed",
         lambda d: [f"seed {s}: {m}" for s in FOLDER_SEEDS[F70L]
                    for m in _apart_on_short(f"{F70L}/cape_ctc_s{s}", [f"{F70L}/none_ctc_s{s}"])]),
    Claim("70 ms 3x: CAPE - none per seed", "seed at 2-4 s: {} [{}, {}], {} [{}, {}], {} [{}, {}])",
          lambda d: [v for s in FOLDER_SEEDS[F70L] for v in diff(d, "cape", "none", "test", "2-4", F70L, seeds=(s,))]),
    Claim("70 ms 3x: seeds agree",
          "Seeds agree (in context at 160 s, seeds 0, 1, 2: sinusoidal {}, {}, {}×; `none` {}, {}, {}×; CAPE "
          "{}, {}, {}×)",
          lambda d: [in_ctx(d, pe, F70L, seeds=(s,)).ratio for pe in ("sinusoidal", "none", "cape")
                     for s in FOLDER_SEEDS[F70L]]),
    Claim("70 ms: relative in 1100 steps", "(relative: {} / {} % in 1100 steps)",
          lambda d: [cer(d, "relative", folder="arms/frontend70"), long_(d, "relative", folder="arms/frontend70")]),
    # Conformer
    Claim("Conformer: answer",
          "RoPE no longer collapses ({} % at 160 s against the Transformer's {} %, both seeds)",
          lambda d: [long_(d, "rope", folder="arms/conformer"), long_(d, "rope")]),
    Fact("Conformer: RoPE below the Transformer in both seeds", "against the Transformer's 23.5 %, both seeds",
         lambda d: [] if max(per_seed(d, "rope", LONG, "longform", "arms/conformer"))
         < min(per_seed(d, "rope", LONG, "longform")) else ["a Conformer RoPE seed is not below"]),
    Fact("Conformer: RoPE drifts most", "RoPE is the Conformer that drifts most", _conformer_rope_drifts_most),
    Claim("Conformer: RoPE over none", "Conformer that drifts most ({}×), {} points above `none` at 160 s [{}, {}]",
          lambda d: [ratio(d, "rope", folder="arms/conformer"), *diff(d, "rope", "none", "longform", LONG, "arms/conformer")]),
    *[Claim(f"Conformer: {pe} row", f"| {name} | {{}} ({{}}, {{}}) / {{}} / {bold}({{}}, {{}}) | {{}}× [{{}}, {{}}] | "
            + ("– | " if pe == "none" else "{} [{}, {}] | ") + "{} / {} | {} / {} / {} |",
            (lambda pe: lambda d: _conformer_row(d, pe))(pe))
      for pe, name, bold in (("none", "none", "{} "), ("sinusoidal", "sinusoidal", "{} "), ("rope", "RoPE", "{} "),
                             ("relative", "relative", "**{}** "), ("cape", "CAPE", "{} "))],
    Fact("Conformer beats every Transformer", "Every Conformer beats the best Transformer (relative) at every length",
         _conformer_beats_transformers),
    Claim("Conformer: within 1.1 points", "the five are within {} points of each other at every length",
          lambda d: [max(max(v) - min(v) for v in zip(*[[c for _, c in all_cells(d, pe, "arms/conformer")]
                                                         for pe in CONFORMER_PES]))]),
    Fact("Conformer: none differs at 2-4 s", "at 2-4 s no PE differs from `none` (paired CIs include 0)",
         _conformer_paired_2_4),
    Claim("Conformer: RoPE attention", "attends less locally than in the Transformer ({} against {} at 2-3 s, its seed 4)",
          lambda d: [_arm_local("conformer", "rope")[0], rope_s4_attention("ladder_test_alone")[0]]),
    Fact("Conformer: ratio CIs which", "include 1 except RoPE's", _conformer_ratio_cis),
    Claim("Conformer: CAPE and sinusoidal", "CAPE and sinusoidal end within {} point of each other",
          lambda d: [abs(long_(d, "cape", folder="arms/conformer") - long_(d, "sinusoidal", folder="arms/conformer"))]),
    # hybrid
    Claim("hybrid",
          "relative and sinusoidal ({}–{} % CER at 0-4 s against {}–{} % for their CTC heads); behind `none` it cannot "
          "align ({} % at 2-4 s). Past the training lengths it fails whatever the PE ({}–{} % at 32-64 s, mostly early "
          "stops; joint CTC/attention {}–{} %), while the CTC heads repeat the CTC study (RoPE {}× at 160 s, "
          "relative {}×)",
          lambda d: [*_minmax(_hybrid(d, pe, "test", b) for pe in ("rope", "relative", "sinusoidal") for b in ("0-2", "2-4")),
                     *_minmax(_hybrid(d, pe, "test_ctc", b) for pe in ("rope", "relative", "sinusoidal")
                              for b in ("0-2", "2-4")),
                     _hybrid(d, "none", "test", "2-4"),
                     *_minmax(_hybrid(d, pe, "test", "32-64") for pe in ("none", "rope", "relative", "sinusoidal")),
                     *_minmax(_hybrid(d, pe, "test_joint", "32-64") for pe in ("none", "rope", "relative", "sinusoidal")),
                     *[_hybrid(d, pe, "longform_ctc", LONG) / _hybrid(d, pe, "test_ctc", "2-4")
                       for pe in ("rope", "relative")]]),
    # recommendation
    Claim("recommendation: relative",
          "| relative (Transformer-XL) | **first choice**, short and long inputs | {} → {} → {} % ({}× in context); the most "
          "accurate model from 8 s on; the only PE that works with a 70 ms front end ({} → {} → {} %); hybrid: best "
          "joint decoding at 32-64 s ({} %) |",
          lambda d: [*trio(d, "relative"), in_ctx(d, "relative").ratio, *trio(d, "relative", folder="arms/frontend70"),
                     _hybrid(d, "relative", "test_joint", "32-64")]),
    Fact("recommendation: relative best joint decoding", "hybrid: best joint decoding at 32-64 s",
         lambda d: [] if min(("none", "rope", "relative", "sinusoidal"), key=lambda pe: _hybrid(d, pe, "test_joint", "32-64"))
         == "relative" else ["another PE's joint decoding is better"]),
    Claim("recommendation: alibi, rem",
          "| alibi, rem | good, flat; next after relative | ALiBi {} → {} → {} %, REM {} → {} → {} % ({}×, {}× in context) |",
          lambda d: [*trio(d, "alibi"), *trio(d, "rem"), in_ctx(d, "alibi").ratio, in_ctx(d, "rem").ratio]),
    Claim("recommendation: shaw", "{} → {} → {} % ({}× in context): past its clip distance every key looks alike; windowed {} % at 160 s",
          lambda d: [*trio(d, "shaw"), in_ctx(d, "shaw").ratio, long_(d, "shaw", "_window")]),
    Claim("recommendation: rope",
          "| {} → {} → {} % ({}× [{}, {}]) in both seeds; windowed {} → {} → {} %; hybrid CTC head {}× |",
          lambda d: [*trio(d, "rope"), *ratio_ci(d, "rope"), *trio(d, "rope", "_window"),
                     _hybrid(d, "rope", "longform_ctc", LONG) / _hybrid(d, "rope", "test_ctc", "2-4")]),
    Claim("recommendation: t5, sinusoidals",
          "| in context: T5 {} → {} → {} % ({}×), windowed {} % at 160 s; sinusoidal {} → {} → {} % ({}×); "
          "√D {} → {} → {} % ({}×) |",
          lambda d: [*trio(d, "t5"), in_ctx(d, "t5").ratio, long_(d, "t5", "_window"), *trio(d, "sinusoidal"),
                     in_ctx(d, "sinusoidal").ratio, *trio(d, "sinusoidal_sqrtd"), in_ctx(d, "sinusoidal_sqrtd").ratio]),
    Claim("recommendation: none, conv, learned, cape",
          "nor with a 70 ms front end ({} % at 2-4 s, `none` {}; with 3× the steps {}, `none` {}) | `none` {} → {} → "
          "{} %, conv {} → {} → {} %, learned {} → {} → {} %, CAPE {} → {} → {} % |",
          lambda d: [cer(d, "cape", folder="arms/frontend70"), cer(d, "none", folder="arms/frontend70"),
                     cer(d, "cape", folder=F70L), cer(d, "none", folder=F70L),
                     *[v for pe in ("none", "conv", "learned_wrap", "cape") for v in trio(d, pe)]]),
    Claim("recommendation: none for seq2seq",
          "hybrid attention decoding {} / {} % at 0-2 / 2-4 s against {}–{} % behind RoPE, relative, sinusoidal",
          lambda d: [_hybrid(d, "none", "test", "0-2"), _hybrid(d, "none", "test", "2-4"),
                     *_minmax(_hybrid(d, pe, "test", b) for pe in ("rope", "relative", "sinusoidal") for b in ("0-2", "2-4"))]),
    Claim("Conformer summary",
          "relative is still first ({} → {} → {} %), RoPE needs no remedy ({} % at 160 s) but is the one that drifts "
          "({} points over `none` at 160 s)",
          lambda d: [*trio(d, "relative", folder="arms/conformer"), long_(d, "rope", folder="arms/conformer"),
                     diff(d, "rope", "none", "longform", LONG, "arms/conformer")[0]]),
]


# ---------------------------------------------------------------- study notes RESULTS.md quotes

def _retrain_row(d, pe):
    """CER of the first training (study/runs) / the second (study/retrain), seed 0, per bucket."""
    return [v for b, s in (("0-2", "test"), ("2-4", "test"), ("32-64", "test"), (LONG, "longform"))
            for v in (cer(d, pe, b, s, seeds=(0,)), cer(d, pe, b, s, "retrain", (0,)))]


def _retrain_moves(d, buckets):
    return max(abs(cer(d, pe, b, s, seeds=(0,)) - cer(d, pe, b, s, "retrain", (0,)))
               for pe in ("relative", "shaw", "t5") for b, s in buckets)


RETRAIN_NOTE_CLAIMS = [
    *[Claim(f"retrain: {pe}", f"| {pe}_ctc_s0 | {{}} / {{}} | {{}} / {{}} | {{}} / {{}} | {{}} / {{}} |",
            (lambda pe: lambda d: _retrain_row(d, pe))(pe)) for pe in ("relative", "shaw", "t5")],
    Claim("retrain: how far",
          "Up to {} points at 2-4 s (Shaw {} / {}) and {} at 0-2 s; at most {} at 32-64 s and 160 s.",
          lambda d: [_retrain_moves(d, [("2-4", "test")]), cer(d, "shaw", seeds=(0,)),
                     cer(d, "shaw", folder="retrain", seeds=(0,)), _retrain_moves(d, [("0-2", "test")]),
                     _retrain_moves(d, [("32-64", "test"), (LONG, "longform")])]),
]


def _head_ratio(d, pe, bucket):
    """A hybrid model's CTC head: ``bucket`` (of test_ctc, or the long-form set) over its 2-4 s CER."""
    top = _hybrid(d, pe, "longform_ctc", LONG) if bucket == LONG else _hybrid(d, pe, "test_ctc", bucket)
    return top / _hybrid(d, pe, "test_ctc", "2-4")


HYBRID_NOTE_CLAIMS = [
    Claim("hybrid note: CTC heads",
          "relative and `none` flat ({}× / {}×, {}× / {}× at 32-64 s / 160 s), sinusoidal rising ({}× / {}×; CTC-only "
          "{}× / {}×), RoPE failing ({}× / {}×; CTC-only {}× / {}×). The hybrid loss cost the CTC heads of `none` and "
          "sinusoidal {} and {} points at 2-4 s (against the CTC-only {} and {} %)",
          lambda d: [_head_ratio(d, "relative", "32-64"), _head_ratio(d, "relative", LONG),
                     _head_ratio(d, "none", "32-64"), _head_ratio(d, "none", LONG),
                     _head_ratio(d, "sinusoidal", "32-64"), _head_ratio(d, "sinusoidal", LONG),
                     cer(d, "sinusoidal", "32-64") / cer(d, "sinusoidal"), ratio(d, "sinusoidal"),
                     _head_ratio(d, "rope", "32-64"), _head_ratio(d, "rope", LONG),
                     cer(d, "rope", "32-64") / cer(d, "rope"), ratio(d, "rope"),
                     _hybrid(d, "none", "test_ctc", "2-4") - cer(d, "none"),
                     _hybrid(d, "sinusoidal", "test_ctc", "2-4") - cer(d, "sinusoidal"),
                     cer(d, "none"), cer(d, "sinusoidal")]),
]

# ---------------------------------------------------------------- the length ladder (study/ladder/README.md)

LADDER = STUDY / "ladder"
RUNGS = (5, 10, 20, 40, 80, 160)
GAP, NOGAP = "gap500ms", "nogap"
S23 = (2, 3)
S2_4 = (2, 3, 4)   # the ladder's main tables since 2026-11-27 (seed 4 in seed4/); S23: what they said before


def lruns(pe, seeds=S23):
    """The ladder runs of ``pe``: seeds 2 and 3 in ladder/, seed 4 in ladder/seed4/ (retrained by the lane)."""
    return tuple(str((L4 if s == 4 else LADDER) / f"{pe}_ctc_s{s}") for s in seeds)


def lad(d, pe, variant=GAP, rung=160, suffix="", seeds=S2_4):
    """The seeds' pooled in-context result at one rung of the test pool (a dose-response cell)."""
    return d.ladder(lruns(pe, seeds), variant, rung, suffix)


def lrow(d, pe, variant, suffix="", seeds=S2_4):
    """A row of the README's table: the ratio at every rung, then the 160 s CI."""
    return [lad(d, pe, variant, r, suffix, seeds).ratio for r in RUNGS] + [
        lad(d, pe, variant, 160, suffix, seeds).ci_low, lad(d, pe, variant, 160, suffix, seeds).ci_high]


def lrange(d, pe, variants=(GAP,), suffix="", seeds=S2_4):
    return _minmax(lad(d, pe, v, r, suffix, seeds).ratio for v in variants for r in RUNGS)


def lrec_ci(d, pe, variant=GAP, rung=160, seeds=S2_4):
    """The CI of a pooled cell over the recordings alone (the seeds' counts summed per recording,
    the seeds never resampled): what the crossed CI's seed draw widens."""
    from asr_pe.evaluation.in_context import paired_ratio_ci
    rows = lad(d, pe, variant, rung, seeds=seeds).rows
    return list(paired_ratio_ci([r.whole_char_errors for r in rows], [r.alone_char_errors for r in rows],
                                n_boot=d.n_boot))


def lci(d, pe, variant=GAP, rung=160, suffix="", seeds=S2_4):
    x = lad(d, pe, variant, rung, suffix, seeds)
    return [x.ratio, x.ci_low, x.ci_high]


def ldiff(d, pe, other, variant=GAP, rung=160, seeds=S2_4):
    """In-context ratio of ``pe`` minus ``other``'s at one rung, paired over the recordings."""
    return list(d.ladder_difference(lruns(pe, seeds), lruns(other, seeds), variant, rung))


def lalone(d, pe, seed):
    """min, max over the rungs (both variants) of the parts' CER alone, one seed."""
    return _minmax(lad(d, pe, v, r, seeds=(seed,)).alone for v in (GAP, NOGAP) for r in RUNGS)


def ltest(d, pe, seed, suffix=""):
    """Test CER % of the no-gap recordings of every rung decoded whole (the rule's rate, on test)."""
    from asr_pe.evaluation.ladder_report import whole_rate
    return whole_rate(d.ladder_run(lruns(pe, (seed,))[0], suffix), variant=NOGAP)


SUFFIX = {"plain": "", "window:2.5": "_window2p5", "window:5": "_window5", "window:10": "_window10",
          "chunked:20:4": "_chunked20o4", "rope_ntk": "_rope_ntk", "rope_ntk@10": "_rope_ntk_t10",
          "rope_yarn": "_rope_yarn"}


def ldev(d, pe, seed, candidate="plain"):
    """Dev CER % the choice is made on: Σ character errors / Σ reference characters of the dev
    pool's no-gap recordings of every rung decoded whole, from their archived bucket tables."""
    path = lruns(pe, (seed,))[0]
    errors = ref = 0
    for r in RUNGS:
        row = next(x for x in d.series([path], f"ladder_dev_{NOGAP}_{r}{SUFFIX[candidate]}").runs[0].rows
                   if x["bucket"] == LONG)
        errors, ref = errors + row["char_errors"], ref + row["ref_chars"]
    return 100 * errors / ref


def _ladder_dev_choices(d, seeds=S23):
    """Every run's choice: the candidate with the lowest dev CER (ties to plain, as printed)."""
    offered = {("rope", 2): list(SUFFIX), **{(pe, s): ["plain", "window:2.5"] for pe in ("rope", "relative")
                                             for s in (3, 4)},
               **{(pe, s): ["plain", "window:2.5", "window:5"] for pe in ("sinusoidal",) for s in S2_4},
               **{(pe, s): ["plain", "window:2.5"] for pe in ("none", "cape") for s in S2_4}}
    printed = {("relative", 3): "plain"}
    bad = []
    for (pe, seed), cands in offered.items():
        if seed not in seeds:
            continue
        rates = {c: ldev(d, pe, seed, c) for c in cands}
        best = min(rates, key=rates.get)
        want = printed.get((pe, seed), "window:2.5")
        if best != want:
            bad.append(f"{pe} seed {seed}: lowest dev CER {best} ({rates[best]:.3f}), the README says {want}")
    return bad


def _same_parts(d):
    """Every rung's gap and no-gap recordings are made of the same parts in the same order (the
    ladder's composition), so the two joins pair recording by recording."""
    import json
    bad = []
    for r in RUNGS:
        manifests = [d.ladder_index()["sets"]["test"]["recordings"][v][str(r)] for v in (GAP, NOGAP)]
        parts = [[[x["id"] for x in json.loads(line)["parts"]] for line in Path(m).read_text().splitlines() if line.strip()]
                 for m in manifests]
        if parts[0] != parts[1]:
            bad.append(f"rung {r}: the gap and no-gap recordings are made of different parts")
    return bad


def lgapdiff(d, pe, rung, seeds=S2_4):
    """In-context ratio without gaps minus with 0.5 s gaps at one rung (seeds pooled), paired over
    recordings made of the same parts (`paired_ratio_difference`; recording ids matched by name)."""
    import dataclasses

    from asr_pe.plots.results_claims import paired_ratio_difference

    def renamed(res):
        return dataclasses.replace(res, rows=tuple(dataclasses.replace(x, id=x.id.replace(GAP, NOGAP))
                                                   for x in res.rows))
    key = float(rung)
    return d._memo(("ladder_gapdiff", pe, key, tuple(seeds)), lambda: paired_ratio_difference(
        [d.ladder_run(p)[(NOGAP, key)] for p in lruns(pe, seeds)],
        [renamed(d.ladder_run(p)[(GAP, key)]) for p in lruns(pe, seeds)], n_boot=d.n_boot))


def _gap_helps_relative_only(d):
    """Relative: no gap − gap > 0 at every rung (paired CI above 0); sinusoidal, CAPE and `none`:
    every paired CI includes 0; RoPE: above 0 at 5 s, below 0 from 40 s on."""
    bad = _same_parts(d)
    for r in RUNGS:
        bad += supports("degrades more", lgapdiff(d, "relative", r), f"relative {r} s")
        bad += [e for pe in ("sinusoidal", "cape", "none") for e in supports("like", lgapdiff(d, pe, r), f"{pe} {r} s")]
    bad += supports("degrades more", lgapdiff(d, "rope", 5), "rope 5 s")
    bad += [e for r in (40, 80, 160) for e in supports("degrades less", lgapdiff(d, "rope", r), f"rope {r} s")]
    return bad


def _seed4_moves(d):
    """How far folding seed 4 in moved the tables' cells (seeds 2-4 against 2-3): (largest move of
    RoPE's plain ratio, variant, rung) and (largest move of every other cell of the two tables, ...)."""
    cells = [(pe, suffix) for pe in ("rope", "sinusoidal", "none", "cape") for suffix in ("", "_window2p5")]
    moves = {(pe, suffix, v, r): abs(lad(d, pe, v, r, suffix).ratio - lad(d, pe, v, r, suffix, S23).ratio)
             for pe, suffix in cells + [("relative", "")] for v in (GAP, NOGAP) for r in RUNGS}
    rope = max((m, v, r) for (pe, suffix, v, r), m in moves.items() if (pe, suffix) == ("rope", ""))
    rest = max((m, pe + suffix, v, r) for (pe, suffix, v, r), m in moves.items() if (pe, suffix) != ("rope", ""))
    return rope, rest


def _ladder_relative_gap_cue(d):
    """Without gaps relative's ratio is above its gap ratio at every rung, by the printed range."""
    return [f"rung {r}" for r in RUNGS if lad(d, "relative", NOGAP, r).ratio <= lad(d, "relative", GAP, r).ratio]


L4 = LADDER / "seed4"      # seed 4 of the five PEs, retrained by the backlog lane (recipes/synth/study/backlog.sh)


def l4(pe):
    return (str(L4 / f"{pe}_ctc_s4"),)


def l4dev(d, pe, candidate="plain"):
    errors = ref = 0
    for r in RUNGS:
        row = next(x for x in d.series([l4(pe)[0]], f"ladder_dev_{NOGAP}_{r}{SUFFIX[candidate]}").runs[0].rows
                   if x["bucket"] == LONG)
        errors, ref = errors + row["char_errors"], ref + row["ref_chars"]
    return 100 * errors / ref


def l4test(d, pe, suffix=""):
    from asr_pe.evaluation.ladder_report import whole_rate
    return whole_rate(d.ladder_run(l4(pe)[0], suffix), variant=NOGAP)


def _l4_row(pe):
    """The reproduction check's line of ``<pe>_ctc_s4`` (``seed4/retrained.jsonl``, written by the lane)."""
    import json
    rows = [json.loads(x) for x in (L4 / "retrained.jsonl").read_text().splitlines() if x.strip()]
    return next((r for r in rows if r["run"] == f"{pe}_ctc_s4"), None)


def _l4_reproduced(pe):
    row = _l4_row(pe)
    return [] if row and row["reproduced"] and row["test"]["differing"] == row["longform"]["differing"] == 0 \
        else [f"{pe}_ctc_s4 not reproduced: {row}"]


LM = LADDER / "more_pes"   # the seven PEs never on the ladder before, seeds 0 and 1 (backlog.sh stage 2)


def _lm(pe: str, seed: int) -> str:
    """A more_pes run's path: seed 0 in more_pes/, seed 1 in more_pes/seed1/ (one table each, < 2 MB)."""
    return str(LM / ("seed1" if seed == 1 else "") / f"{pe}_ctc_s{seed}")
MORE_PES = ("shaw", "t5", "alibi", "rem", "conv", "learned_wrap", "sinusoidal_sqrtd")
MORE_PES_CANDIDATES = ("plain", "window:2.5", "window:5", "window:10", "logit_scale", "chunked:20:4")


def _more_pes_dev(d, pe, seed) -> dict[str, float]:
    """A more_pes run's dev CER % per candidate, by the choice's rule (`ldev`)."""
    suffix = {**SUFFIX, "logit_scale": "_logit_scale"}
    dev = {}
    for cand in MORE_PES_CANDIDATES:
        errors = ref = 0
        for r in RUNGS:
            row = next(x for x in d.series([_lm(pe, seed)], f"ladder_dev_{NOGAP}_{r}{suffix[cand]}")
                       .runs[0].rows if x["bucket"] == LONG)
            errors, ref = errors + row["char_errors"], ref + row["ref_chars"]
        dev[cand] = 100 * errors / ref
    return dev


def _more_pes_chose_window(d, runs=(("shaw", 0), ("shaw", 1), ("t5", 0), ("t5", 1))) -> list[str]:
    """Each run's lowest dev CER is window:2.5's, as the README and RESULTS.md print it."""
    chosen = {(pe, s): min(dev, key=dev.get) for pe, s in runs for dev in [_more_pes_dev(d, pe, s)]}
    return [f"{pe} seed {s}: lowest dev CER {c}" for (pe, s), c in chosen.items() if c != "window:2.5"]


def _more_pes(d, pe, seed, chosen="window:2.5"):
    """A more_pes run's README numbers: its dev CER per candidate, test CER chosen and plain, the
    plain ratios at every rung with the 160 s CI, the chosen decoding's 160 s cell."""
    path = (_lm(pe, seed),)
    dev = _more_pes_dev(d, pe, seed)
    assert min(dev, key=dev.get) == chosen, f"{pe} seed {seed}: the lowest dev CER is not {chosen}'s: {dev}"
    from asr_pe.evaluation.ladder_report import whole_rate
    test = [whole_rate(d.ladder_run(path[0], s), variant=NOGAP) for s in (SUFFIX[chosen], "")]
    plain, window = d.ladder(path, GAP, 160), d.ladder(path, GAP, 160, SUFFIX[chosen])
    return [*dev.values(), *test, *_plain_ratios(d, pe, seed), plain.ci_low, plain.ci_high,
            window.ratio, window.ci_low, window.ci_high]


def _about_from(rung, level=1.1):
    """A check of `_more_pes`'s values: the plain ratios from ``rung`` s on all round to ``level``
    ("rises to about 1.1x and holds")."""
    def check(values):
        ratios = values[8:14]  # 5 ... 160 s
        tail = ratios[RUNGS.index(rung):]
        assert all(round(r, 1) == level for r in tail), f"ratios from {rung} s: {tail}"
        return values
    return check


_flat_from_40s, _rises_then_holds = _about_from(40), _about_from(20)


def _grows_at_every_doubling(values):
    """`_more_pes`'s values, checked that the plain ratio rises at every rung."""
    ratios = values[8:14]
    assert all(b > a for a, b in zip(ratios, ratios[1:])), f"ratios {ratios}"
    return values


def _tie_margin(dev) -> float:
    """How far below the next candidate the chosen (lowest) dev CER is, rounded up to 0.01 points."""
    low, second = sorted(dev)[:2]
    assert second - low < 0.01, f"not a tie: {low} and {second}"
    return 0.01




def _within(level):
    """A check of `_more_pes`'s values: every plain ratio rounds to at most ``level``."""
    def check(values):
        assert all(round(r, 2) <= level for r in values[8:14]), f"ratios {values[8:14]}"
        return values
    return check


def _holds_near(level, rung, tol):
    """A check of `_more_pes`'s values: the plain ratios from ``rung`` s on are all within ``tol`` of
    ``level`` ("rises to about 1.15x by 20 s and holds")."""
    def check(values):
        tail = values[8:14][RUNGS.index(rung):]
        assert all(abs(r - level) <= tol for r in tail), f"ratios from {rung} s: {tail}"
        return values
    return check


def _plain_ratios(d, pe, seed) -> list[float]:
    """A more_pes run's plain in-context ratio at every rung (0.5 s gaps), 5 ... 160 s."""
    return [d.ladder((_lm(pe, seed),), GAP, r).ratio for r in RUNGS]


def _seeds01(d, pe, suffixes=("", SUFFIX["window:2.5"])) -> list[float]:
    """A more_pes PE's seeds 0 and 1 pooled at 160 s (crossed CI): ratio and CI per decoding (plain, then
    window:2.5's unless ``suffixes`` says otherwise)."""
    runs = tuple(_lm(pe, s) for s in (0, 1))
    return [x for suffix in suffixes for c in [d.ladder(runs, GAP, 160, suffix)] for x in (c.ratio, c.ci_low, c.ci_high)]


def _seeds01_plain(d, pe) -> list[float]:
    """Seeds 0 and 1 pooled at 160 s, plain decoding: ratio and crossed CI."""
    return _seeds01(d, pe, ("",))


def _more_pes_rows():
    import json
    return [json.loads(x) for f in (LM / "retrained.jsonl", LM / "seed1" / "retrained.jsonl")
            for x in f.read_text().splitlines() if x.strip()]


def _more_pes_retrained(pe, seed):
    return next(r for r in _more_pes_rows() if r["run"] == f"{pe}_ctc_s{seed}")


def _s1_reproduced_s0_not(pe):
    """A Fact's check: seed 1's retrain reproduces its archived run, seed 0's does not."""
    return lambda d: ([] if _more_pes_retrained(pe, 1)["reproduced"] and not _more_pes_retrained(pe, 0)["reproduced"]
                      else [f"{pe}: reproduction"])


def _s1_above_s0(pe):
    """A Fact's check: seed 1's plain ratio is above seed 0's at every rung."""
    return lambda d: [f"{pe} at {r} s" for r, a, b in zip(RUNGS, _plain_ratios(d, pe, 0), _plain_ratios(d, pe, 1))
                      if not b > a]


def _dev_choices(pe, expected):
    """A Fact's check: the lowest dev CER of seeds 0 and 1 are ``expected`` (one candidate each)."""
    return lambda d: ([] if [min(v, key=v.get) for s in (0, 1) for v in [_more_pes_dev(d, pe, s)]] == list(expected)
                      else [f"{pe}: dev choices"])


LADDER_NOTE_CLAIMS = [
    Claim("ladder more_pes: Shaw seed 0",
          "dev: plain {}, **window:2.5\n{}**, window:5 {}, window:10 {}, logit_scale {}, chunked:20:4 {}; test {} against\n{} %. "
          "It grows at every doubling, {}, {}, {}, {}, {}, {}× from 5 to 160 s (gaps;\n160 s: [{}, {}] over the recordings), "
          "and {}× [{}, {}] at 160 s with window:2.5",
          lambda d: _more_pes(d, "shaw", 0)),
    Fact("ladder more_pes: the dev choices", "Shaw seed 0, retrained", _more_pes_chose_window),
    Fact("ladder more_pes: Shaw seed 0 reproduced", "Shaw seed 0, retrained,\nreproduces its archived run exactly",
         lambda d: [] if _more_pes_retrained("shaw", 0)["reproduced"] else ["shaw_ctc_s0 not reproduced"]),
    Claim("ladder more_pes: T5 seed 0",
          "does **not** reproduce its archived run ({} of the {} test hypotheses\ndiffer): another sample of the recipe. "
          "Dev: plain {}, **window:2.5 {}**, window:5 {},\nwindow:10 {}, logit_scale {}, chunked:20:4 {}; test {} against {} %. "
          "It grows at every\ndoubling too, {}, {}, {}, {}, {}, {}× (160 s: [{}, {}]), and {}× [{}, {}]\nwith window:2.5",
          lambda d: [_more_pes_retrained("t5", 0)["test"]["differing"], _more_pes_retrained("t5", 0)["test"]["utterances"],
                     *_more_pes(d, "t5", 0)]),
    Fact("ladder more_pes: ALiBi seed 0 reproduced", "ALiBi seed 0, retrained, reproduces its archived run exactly too",
         lambda d: [] if _more_pes_retrained("alibi", 0)["reproduced"] else ["alibi_ctc_s0 not reproduced"]),
    Claim("ladder more_pes: ALiBi seed 0",
          "Dev: plain {}, **window:2.5\n{}**, window:5 {}, window:10 {}, logit_scale {}, chunked:20:4 {}; test {} against\n{} %. "
          "Its ratio rises to about 1.1× and stays there, {}, {}, {}, {}, {}, {}× (160 s:\n[{}, {}]), "
          "and window:2.5 leaves it at {}× [{}, {}] at 160 s",
          lambda d: _flat_from_40s(_more_pes(d, "alibi", 0))),
    Fact("ladder more_pes: REM seed 0 reproduced", "REM seed 0, retrained, reproduces its archived run exactly as well",
         lambda d: [] if _more_pes_retrained("rem", 0)["reproduced"] else ["rem_ctc_s0 not reproduced"]),
    Claim("ladder more_pes: REM seed 0",
          "plain {}, window:2.5 {}, window:5 {}, window:10 {}, logit_scale {}, **chunked:20:4\n{}** "
          "(lowest by less than {} points: a tie with the windows); test {} against {} %. Its\n"
          "ratio rises to about 1.1× by 20 s and holds, {}, {}, {}, {}, {}, {}× (160 s: [{},\n{}]), "
          "and chunked:20:4 leaves it at {}× [{}, {}] at 160 s",
          lambda d: (lambda v: [*v[:6], _tie_margin(v[:6]), *v[6:]])(_rises_then_holds(_more_pes(d, "rem", 0, "chunked:20:4")))),
    Claim("ladder opening: Shaw, T5 and conv grow",
          "Shaw, T5 and conv grow at every\ndoubling ({}×, {}× and {}× at 160 s)",
          lambda d: [_grows_at_every_doubling(_more_pes(d, pe, 0, c))[13]
                     for pe, c in (("shaw", "window:2.5"), ("t5", "window:2.5"), ("conv", "window:5"))]),
    Claim("ladder more_pes: conv seed 0",
          "does **not** reproduce its archived run ({} of the {} test hypotheses\ndiffer): another sample of the "
          "recipe. Dev: plain {}, window:2.5 {}, **window:5 {}**\n(lowest by less than {} points: a tie with "
          "window:2.5), window:10 {}, logit_scale {},\nchunked:20:4 {}; test {} against {} %. It grows at every "
          "doubling, {}, {}, {}, {},\n{}, {}× (160 s: [{}, {}]), and window:5 leaves it at {}× [{}, {}] at 160 s",
          lambda d: (lambda r, v: [r["test"]["differing"], r["test"]["utterances"], v[0], v[1], v[2],
                                   _tie_margin(v[:6]), *v[3:]])(
              _more_pes_retrained("conv", 0), _grows_at_every_doubling(_more_pes(d, "conv", 0, "window:5")))),
    Fact("ladder opening: ALiBi, REM and learned hold", "ALiBi, REM and learned rise to about 1.1× and hold",
         lambda d: [] if (_flat_from_40s(_more_pes(d, "alibi", 0)) and
                          _rises_then_holds(_more_pes(d, "rem", 0, "chunked:20:4")) and
                          _rises_then_holds(_more_pes(d, "learned_wrap", 0))) else ["no values"]),
    Claim("ladder more_pes: learned seed 0",
          "does **not** reproduce its archived run\n({} of the {} test hypotheses differ): another sample of the "
          "recipe. Dev: plain {},\n**window:2.5 {}**, window:5 {}, window:10 {}, logit_scale {}, chunked:20:4 {}; "
          "test {}\nagainst {} %. Its ratio rises to about 1.1× by 20 s and holds, {}, {}, {}, {}, {},\n{}× "
          "(160 s: [{}, {}]), and window:2.5 leaves it at {}× [{}, {}] at 160 s",
          lambda d: (lambda r, v: [r["test"]["differing"], r["test"]["utterances"], *v])(
              _more_pes_retrained("learned_wrap", 0), _rises_then_holds(_more_pes(d, "learned_wrap", 0)))),
    *[Fact(f"ladder more_pes: seeds 0 and 1 of all seven ({where})", words,
           lambda d: (lambda runs: [] if runs == {f"{pe}_ctc_s{s}" for pe in MORE_PES for s in (0, 1)}
                      else [f"runs retrained: {sorted(runs)}"])({r["run"] for r in _more_pes_rows()}))
      for where, words in (("opening", "seed 0 of all seven is now"),
                           ("opening", "Seed 1\nof all seven is on it too"),
                           ("later seeds", "seeds 0 and 1 of the seven PEs never decoded on the ladder\nbefore"))],
    Claim("ladder more_pes: ALiBi seed 1",
          "Dev: plain {}, **window:2.5 {}**,\nwindow:5 {}, window:10 {}, logit_scale {}, chunked:20:4 {}; test {} against "
          "{} %. It\nstays within 1.07× at every rung, {}, {}, {}, {}, {}, {}× (160 s: [{}, {}]), and\nwindow:2.5 leaves "
          "it at {}× [{}, {}]. Seeds 0 and 1 together at 160 s: {}× [{}, {}]\nplain, {}× [{}, {}] with window:2.5",
          lambda d: [*_within(1.07)(_more_pes(d, "alibi", 1)), *_seeds01(d, "alibi")]),
    Fact("ladder more_pes: ALiBi seed 1 reproduced", "ALiBi seed 1, retrained, reproduces its archived run exactly.",
         lambda d: [] if _more_pes_retrained("alibi", 1)["reproduced"] else ["alibi_ctc_s1 not reproduced"]),
    Claim("ladder opening: ALiBi seed 1", "ALiBi stays within 1.07× (seeds 0-1\n{}× [{}, {}] at 160 s)",
          lambda d: _within(1.07)(_more_pes(d, "alibi", 1)) and _seeds01(d, "alibi")[:3]),
    Claim("ladder more_pes: Shaw seed 1",
          "Shaw seed 1, retrained, does **not** reproduce its\narchived run ({} of the {} test hypotheses differ): "
          "another sample of the recipe. Dev: plain {},\n**window:2.5 {}**, window:5 {}, window:10 {}, logit_scale {}, "
          "chunked:20:4 {}; test {}\nagainst {} %. It grows at every doubling, as seed 0 does: {}, {}, {}, {}, {}, {}×\n"
          "(160 s: [{}, {}]), and {}× [{}, {}] with window:2.5. Seeds 0 and 1 together at 160 s:\n"
          "{}× [{}, {}] plain, {}× [{}, {}] with window:2.5",
          lambda d: (lambda r, v, both: [r["test"]["differing"], r["test"]["utterances"], *v, *both])(
              _more_pes_retrained("shaw", 1), _grows_at_every_doubling(_more_pes(d, "shaw", 1)),
              _seeds01(d, "shaw"))),
    Claim("ladder more_pes: T5 seed 1",
          "T5 seed 1, retrained, does **not** reproduce its archived run either ({} of the {} test\nhypotheses differ). "
          "Dev: plain {}, **window:2.5 {}**, window:5 {}, window:10 {},\nlogit_scale {}, chunked:20:4 {}; test {} "
          "against {} %. It grows at every doubling, as seed\n0 does: {}, {}, {}, {}, {}, {}× (160 s: [{}, {}]), and "
          "{}× [{}, {}] with\nwindow:2.5. Seeds 0 and 1 together at 160 s: {}× [{}, {}] plain, {}× [{}, {}] with\n"
          "window:2.5",
          lambda d: (lambda r, v, both: [r["test"]["differing"], r["test"]["utterances"], *v, *both])(
              _more_pes_retrained("t5", 1), _grows_at_every_doubling(_more_pes(d, "t5", 1)), _seeds01(d, "t5"))),
    Claim("ladder more_pes: REM seed 1",
          "Dev: plain {},\nwindow:2.5 {}, **window:5 {}** ({} points below window:2.5), window:10 {}, logit_scale {},\n"
          "chunked:20:4 {}; test {} against {} %. Its ratio rises to about 1.15× by 20 s and holds, a\nlittle above "
          "seed 0's at every rung: {}, {}, {}, {}, {}, {}× (160 s: [{}, {}]), and\nwindow:5 leaves it at {}× [{}, {}]. "
          "Seeds 0 and 1 together at 160 s: {}× [{}, {}]\nplain",
          lambda d: (lambda v: [v[0], v[1], v[2], v[1] - v[2], *v[3:], *_seeds01_plain(d, "rem")])(
              _holds_near(1.15, 20, 0.03)(_more_pes(d, "rem", 1, "window:5")))),
    Fact("ladder more_pes: REM seed 1 reproduced", "REM seed 1, retrained, reproduces its archived run exactly, as seed 0 does",
         lambda d: [] if _more_pes_retrained("rem", 1)["reproduced"] else ["rem_ctc_s1 not reproduced"]),
    Fact("ladder more_pes: REM seed 1 above seed 0", "little above\nseed 0's at every rung", _s1_above_s0("rem")),
    Fact("ladder more_pes: REM's seeds chose differently", "seed 0\nchunked:20:4, seed 1 window:5",
         _dev_choices("rem", ("chunked:20:4", "window:5"))),
    Claim("ladder more_pes: conv seed 1",
          "Dev: plain\n{}, **window:2.5 {}**, window:5 {}, window:10 {}, logit_scale {}, chunked:20:4 {}; test\n{} "
          "against {} %. It grows at every doubling, as seed 0 does, a little faster: {}, {}, {},\n{}, {}, {}× "
          "(160 s: [{}, {}]), and window:2.5 leaves it at {}× [{}, {}]. Seeds 0\nand 1 together at 160 s: {}× [{}, {}] plain",
          lambda d: [*_grows_at_every_doubling(_more_pes(d, "conv", 1)), *_seeds01_plain(d, "conv")]),
    Fact("ladder more_pes: conv seed 1 reproduced, seed 0 not", "Conv seed 1, retrained, reproduces its archived run "
         "exactly (seed 0's retrain did not)", _s1_reproduced_s0_not("conv")),
    Fact("ladder more_pes: conv seed 1 faster than seed 0", "as seed 0 does, a little faster", _s1_above_s0("conv")),
    Claim("ladder opening: conv seed 1", "conv grows at every doubling again (seeds 0-1 {}× [{}, {}])",
          lambda d: _grows_at_every_doubling(_more_pes(d, "conv", 1)) and _seeds01_plain(d, "conv")),
    Claim("ladder more_pes: learned seed 1",
          "Dev: plain {}, window:2.5 {}, **window:5 {}**, window:10 {}, logit_scale {},\nchunked:20:4 {}; test {} against "
          "{} %. Its ratio rises to about 1.15× by 20 s and holds,\nhigher than seed 0's at every rung: {}, {}, {}, {}, {}, {}× "
          "(160 s: [{}, {}]), and\nwindow:5 leaves it at {}× [{}, {}]. Seeds 0 and 1 together at 160 s: {}× [{}, {}]\nplain",
          lambda d: [*_holds_near(1.15, 20, 0.03)(_more_pes(d, "learned_wrap", 1, "window:5")),
                     *_seeds01_plain(d, "learned_wrap")]),
    Fact("ladder more_pes: learned seed 1 reproduced, seed 0 not", "Learned (`learned_wrap`) seed 1, retrained, "
         "reproduces its archived run exactly (seed 0's retrain\ndid not)", _s1_reproduced_s0_not("learned_wrap")),
    Fact("ladder more_pes: learned seed 1 above seed 0", "higher than seed 0's at every rung:", _s1_above_s0("learned_wrap")),
    Fact("ladder more_pes: learned's seeds chose differently", "seed 0 chose window:2.5 on dev, seed 1 window:5",
         _dev_choices("learned_wrap", ("window:2.5", "window:5"))),
    Claim("ladder more_pes: sqrt(D) sinusoidal seed 1",
          "Dev: plain {}, **window:2.5 {}**, window:5 {}, window:10 {}, logit_scale\n{}, chunked:20:4 {}; test {} "
          "against {} %. It grows at every doubling: {}, {}, {},\n{}, {}, {}× (160 s: [{}, {}]), and window:2.5 leaves it "
          "at {}× [{}, {}]. Seeds 0\nand 1 together at 160 s: {}× [{}, {}] plain, {}× [{}, {}] with window:2.5; sinusoidal\n"
          "over seeds 2-4 (other seeds, so not paired): {}× [{}, {}]",
          lambda d: [*_grows_at_every_doubling(_more_pes(d, "sinusoidal_sqrtd", 1)), *_seeds01(d, "sinusoidal_sqrtd"),
                     *(lambda c: [c.ratio, c.ci_low, c.ci_high])(d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160))]),
    Fact("ladder more_pes: sqrt(D) seed 1 reproduced, seed 0 not", "√D sinusoidal (`sinusoidal_sqrtd`) seed 1, "
         "retrained, reproduces its archived run exactly (seed 0's\nretrain did not)", _s1_reproduced_s0_not("sinusoidal_sqrtd")),
    Fact("ladder more_pes: sqrt(D) seeds 0-1 below sinusoidal, apart", "the intervals still do not overlap",
         lambda d: [] if _seeds01(d, "sinusoidal_sqrtd")[2] < d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160).ci_low
         else ["they overlap"]),
    Claim("ladder opening: sqrt(D) seed 1", "√D sinusoidal grows at every doubling, to {}× at 160 s\n(seeds 0-1 {}× "
          "[{}, {}], still below sinusoidal's {}×)",
          lambda d: [_grows_at_every_doubling(_more_pes(d, "sinusoidal_sqrtd", 1))[13], *_seeds01(d, "sinusoidal_sqrtd")[:3],
                     d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160).ratio]),
    Claim("ladder opening: learned seed 1", "learned rises to about 1.15×\nand holds (seeds 0-1 {}× [{}, {}])",
          lambda d: _holds_near(1.15, 20, 0.03)(_more_pes(d, "learned_wrap", 1, "window:5")) and _seeds01_plain(d, "learned_wrap")),
    Claim("ladder opening: REM seed 1", "REM rises to about 1.15× and holds (seeds 0-1 {}× [{}, {}])",
          lambda d: _holds_near(1.15, 20, 0.03)(_more_pes(d, "rem", 1, "window:5")) and _seeds01_plain(d, "rem")),
    Claim("ladder opening: Shaw and T5 seed 1",
          "grow at every doubling again ({}× and {}× at 160 s;\nseeds 0-1 {}× [{}, {}] and {}× [{}, {}])",
          lambda d: [_grows_at_every_doubling(_more_pes(d, "shaw", 1))[13],
                     _grows_at_every_doubling(_more_pes(d, "t5", 1))[13],
                     *_seeds01(d, "shaw")[:3], *_seeds01(d, "t5")[:3]]),
    Claim("ladder more_pes: sqrt(D) sinusoidal seed 0",
          "does **not** reproduce its\narchived run ({} of the {} test hypotheses differ): another sample of the recipe. "
          "Dev: plain\n{}, **window:2.5 {}**, window:5 {}, window:10 {}, logit_scale {}, chunked:20:4 {};\ntest {} against "
          "{} %. Its ratio rises to about 1.2× by 40 s, {}, {}, {}, {}, {},\n{}× (160 s: [{}, {}]), and window:2.5 leaves "
          "it at {}× [{}, {}] at 160 s. Sinusoidal\nover seeds 2-4 reaches {}× [{}, {}] there",
          lambda d: (lambda r, v, sin: [r["test"]["differing"], r["test"]["utterances"], *v,
                                        sin.ratio, sin.ci_low, sin.ci_high])(
              _more_pes_retrained("sinusoidal_sqrtd", 0), _about_from(40, 1.2)(_more_pes(d, "sinusoidal_sqrtd", 0)),
              d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160))),
    Fact("ladder more_pes: sqrt(D) below sinusoidal, intervals apart", "the two intervals do not overlap",
         lambda d: [] if _more_pes(d, "sinusoidal_sqrtd", 0)[15] < d.ladder(lruns("sinusoidal") + l4("sinusoidal"),
                                                                           GAP, 160).ci_low else ["they overlap"]),
    Claim("ladder opening: sqrt(D) sinusoidal",
          "√D sinusoidal rises to about 1.2× by 40 s ({}× at 160 s, below sinusoidal's {}×)",
          lambda d: [_about_from(40, 1.2)(_more_pes(d, "sinusoidal_sqrtd", 0))[13],
                     d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160).ratio]),
    Claim("ladder seed 4: none", "exactly (every test and long-form hypothesis, best step {}; `seed4/retrained.jsonl`); "
          "dev: plain {}, **window:2.5 {}**; test {} against {} %. On the test ladder its ratio is {}-{}× with gaps "
          "(seed 4 alone); over seeds 2-4, `none` is at {}× [{}, {}] at 160 s",
          lambda d: [_l4_row("none")["test_best_step"][1], l4dev(d, "none"),
                     l4dev(d, "none", "window:2.5"), l4test(d, "none", "_window2p5"), l4test(d, "none"),
                     *_minmax(d.ladder(l4("none"), GAP, r).ratio for r in RUNGS),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.ladder(lruns("none") + l4("none"), GAP, 160))]),
    Fact("ladder seed 4: none reproduced", "`none` seed 4, retrained, reproduces the archived run",
         lambda d: _l4_reproduced("none")),
    Claim("ladder seed 4: sinusoidal",
          "exactly too (best step {}); dev: plain {}, **window:2.5 {}**, window:5 {}; test {} against {} %. It grows at "
          "every doubling again, {}, {}, {}, {}, {}, {}× from 5 to 160 s (gaps, seed 4 alone); over seeds 2-4, {}× [{}, {}] "
          "at 160 s (window:2.5 {}×), +{} [+{}, +{}] above `none`",
          lambda d: [_l4_row("sinusoidal")["test_best_step"][1],
                     *(l4dev(d, "sinusoidal", c) for c in ("plain", "window:2.5", "window:5")),
                     l4test(d, "sinusoidal", "_window2p5"), l4test(d, "sinusoidal"),
                     *(d.ladder(l4("sinusoidal"), GAP, r).ratio for r in RUNGS),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160)),
                     d.ladder(lruns("sinusoidal") + l4("sinusoidal"), GAP, 160, "_window2p5").ratio,
                     *d.ladder_difference(lruns("sinusoidal") + l4("sinusoidal"), lruns("none") + l4("none"), GAP, 160)]),
    Claim("ladder seed 4: RoPE",
          "does **not** reproduce its archived run: {} of the {} test hypotheses differ",
          lambda d: [_l4_row("rope")["test"]["differing"], _l4_row("rope")["test"]["utterances"]]),
    Claim("ladder seed 4: RoPE, another sample",
          "test CER {} % at 2-4 s and {} % at 160 s (archived seed 4: {}, {} %), {}× [{}, {}] in context on the long-form "
          "set (archived: {}×); its own decodings are archived beside its ladder sets. Dev: plain {}, **window:2.5 {}**; "
          "test {} against {} %. On the ladder {}, {}, {}, {}, {}, {}× from 5 to 160 s (gaps), {}-{}× with the window; over "
          "seeds 2-4, {}× [{}, {}] at 160 s",
          lambda d: [d.value(l4("rope"), "test", "2-4"), d.value(l4("rope"), "longform", LONG),
                     cer(d, "rope", "2-4", "test", "seeds", (4,)), long_(d, "rope", folder="seeds", seeds=(4,)),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.in_context(l4("rope")).pooled),
                     in_ctx(d, "rope", "seeds", (4,)).ratio, l4dev(d, "rope"), l4dev(d, "rope", "window:2.5"),
                     l4test(d, "rope", "_window2p5"), l4test(d, "rope"),
                     *(d.ladder(l4("rope"), GAP, r).ratio for r in RUNGS),
                     *_minmax(d.ladder(l4("rope"), v, r, "_window2p5").ratio for v in (GAP, NOGAP) for r in RUNGS),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.ladder(lruns("rope") + l4("rope"), GAP, 160))]),
    Claim("ladder seed 4: relative",
          "does **not** reproduce its archived run either: {} of the {} test hypotheses differ (best step {} in both; "
          "not investigated). Another sample of the recipe: test CER {} % at 2-4 s and {} % at 160 s (archived seed 4: "
          "{}, {} %), {}× [{}, {}] in context on the long-form set (archived: {}×). Dev: plain {}, **window:2.5 {}**; "
          "test {} against {} %. On the ladder {}, {}, {}, {}, {}, {}× from 5 to 160 s (gaps); over seeds 2-4, {}× [{}, {}] "
          "at 160 s",
          lambda d: [_l4_row("relative")["test"]["differing"], _l4_row("relative")["test"]["utterances"],
                     *sorted(set(_l4_row("relative")["test_best_step"])),
                     d.value(l4("relative"), "test", "2-4"), d.value(l4("relative"), "longform", LONG),
                     cer(d, "relative", "2-4", "test", "seeds", (4,)), long_(d, "relative", folder="seeds", seeds=(4,)),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.in_context(l4("relative")).pooled),
                     in_ctx(d, "relative", "seeds", (4,)).ratio, l4dev(d, "relative"), l4dev(d, "relative", "window:2.5"),
                     l4test(d, "relative", "_window2p5"), l4test(d, "relative"),
                     *(d.ladder(l4("relative"), GAP, r).ratio for r in RUNGS),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.ladder(lruns("relative") + l4("relative"), GAP, 160))]),
    Claim("ladder seed 4: CAPE",
          "CAPE seed 4, retrained, reproduces its archived run exactly (best step {}); dev: plain {}, **window:2.5 {}**; "
          "test {} against {} %. On the ladder {}, {}, {}, {}, {}, {}× from 5 to 160 s (gaps); over seeds 2-4, {}× [{}, {}] "
          "at 160 s, +{} [+{}, +{}] above `none`",
          lambda d: [*sorted(set(_l4_row("cape")["test_best_step"])), l4dev(d, "cape"), l4dev(d, "cape", "window:2.5"),
                     l4test(d, "cape", "_window2p5"), l4test(d, "cape"),
                     *(d.ladder(l4("cape"), GAP, r).ratio for r in RUNGS),
                     *(lambda x: [x.ratio, x.ci_low, x.ci_high])(d.ladder(lruns("cape") + l4("cape"), GAP, 160)),
                     *d.ladder_difference(lruns("cape") + l4("cape"), lruns("none") + l4("none"), GAP, 160)]),
    Fact("ladder seed 4: CAPE reproduced", "CAPE seed 4, retrained, reproduces its archived run exactly",
         lambda d: _l4_reproduced("cape")),
    Fact("ladder seed 4: relative not reproduced", "Relative seed 4, retrained, does **not** reproduce its archived run",
         lambda d: [] if _l4_reproduced("relative") else ["relative_ctc_s4 is reproduced: the README says it is not"]),
    Fact("ladder seed 4: RoPE not reproduced", "RoPE seed 4, retrained, does **not** reproduce its archived run",
         lambda d: [] if _l4_reproduced("rope") else ["rope_ctc_s4 is reproduced: the README says it is not"]),
    Fact("ladder seed 4: sinusoidal reproduced, grows at every doubling, above none",
         "Sinusoidal seed 4, retrained, reproduces its archived run exactly too",
         lambda d: _l4_reproduced("sinusoidal")
         + [f"{a}->{b}" for a, b in zip(RUNGS, RUNGS[1:])
            if d.ladder(l4("sinusoidal"), GAP, b).ratio <= d.ladder(l4("sinusoidal"), GAP, a).ratio]
         + supports("degrades more", d.ladder_difference(lruns("sinusoidal") + l4("sinusoidal"),
                                                         lruns("none") + l4("none"), GAP, 160))),
    Claim("ladder: RoPE answer",
          "RoPE's in-context ratio grows steadily with length, {}× at 5 s, {}× at 10 s, {}× at 20 s, {}× at 40 s, {}× "
          "at 80 s and {}× [{}, {}] at 160 s",
          lambda d: [lad(d, "rope", GAP, r).ratio for r in RUNGS] + [lad(d, "rope").ci_low, lad(d, "rope").ci_high]),
    Claim("ladder: sinusoidal answer", "sinusoidal grows too, more slowly ({}× at 5 s to {}× [{}, {}])",
          lambda d: [lad(d, "sinusoidal", GAP, 5).ratio, lad(d, "sinusoidal").ratio, lad(d, "sinusoidal").ci_low,
                     lad(d, "sinusoidal").ci_high]),
    Claim("ladder: CAPE, none, relative answer",
          "CAPE ({}-{}×) and `none` ({}-{}×) barely, relative hardly ({}-{}×; joins with 0.5 s gaps)",
          lambda d: [*lrange(d, "cape"), *lrange(d, "none"), *lrange(d, "relative")]),
    Claim("ladder: window on RoPE",
          "takes RoPE to {}-{}× at every rung on test (CER {} / {} / {} % against {} / {} / {} % plain over the no-gap "
          "recordings of every rung, seeds 2 / 3 / 4)",
          lambda d: [*lrange(d, "rope", (GAP, NOGAP), "_window2p5"), *(ltest(d, "rope", s, "_window2p5") for s in S2_4),
                     *(ltest(d, "rope", s) for s in S2_4)]),
    Claim("ladder: relative's window, seeds 3 and 4",
          "keeps the plain decoding for seed 3 (a tie) and picks the window for seed 4 (dev {} against {} %)",
          lambda d: [ldev(d, "relative", 4, "window:2.5"), ldev(d, "relative", 4)]),
    Claim("ladder: what the gaps change",
          "higher by +{} to +{} at every rung (paired over recordings made of the same parts, every CI above 0). "
          "Sinusoidal, CAPE and `none` move by at most {} either way (every paired CI includes 0). RoPE's ratio is higher "
          "without gaps at 5 s (+{} [+{}, +{}]) but lower from 40 s on ({} to {}, paired CIs below 0;",
          lambda d: [*_minmax(lgapdiff(d, "relative", r)[0] for r in RUNGS),
                     max(abs(lgapdiff(d, pe, r)[0]) for pe in ("sinusoidal", "cape", "none") for r in RUNGS),
                     *lgapdiff(d, "rope", 5), *_minmax(lgapdiff(d, "rope", r)[0] for r in (40, 80, 160))]),
    Fact("ladder: what the gaps change, paired", "The 0.5 s gaps are a cue for relative", _gap_helps_relative_only),
    Claim("ladder: what seed 4 moves",
          "It moves RoPE's plain ratio by up to {} (at 160 s; seed 4 alone {}×) and every other cell of the tables by at "
          "most {}.",
          lambda d: [_seed4_moves(d)[0][0], lad(d, "rope", seeds=(4,)).ratio, _seed4_moves(d)[1][0]]),
    Fact("ladder: seed 4 moves RoPE most at 160 s", "moves RoPE's plain ratio by up to",
         lambda d: [] if _seed4_moves(d)[0][1:] == (GAP, 160) else [f"RoPE's largest move is at {_seed4_moves(d)[0][1:]}"]),
    Claim("ladder: what the seed draw adds",
          "at 160 s RoPE's CI is [{}, {}] over the recordings alone and [{}, {}] crossed, relative's [{}, {}] and [{}, {}]. "
          "So these CIs cover the choice of test recordings for three trained models, and training variance only roughly "
          "(RoPE per seed at 160 s: {}, {}, {}×)",
          lambda d: [*lrec_ci(d, "rope"), *lci(d, "rope")[1:], *lrec_ci(d, "relative"), *lci(d, "relative")[1:],
                     *(lad(d, "rope", seeds=(s,)).ratio for s in S2_4)]),
    Fact("ladder: every seed-4 choice", "every one of the five chose window:2.5, relative included",
         lambda d: _ladder_dev_choices(d, seeds=(4,))),
    Claim("ladder: window on sinusoidal", "it takes it from {}× to {}× at 160 s",
          lambda d: [lad(d, "sinusoidal").ratio, lad(d, "sinusoidal", suffix="_window2p5").ratio]),
    Claim("ladder: gaps", "joined without gaps its ratio is {}-{}× (gaps: {}-{}×)",
          lambda d: [*lrange(d, "relative", (NOGAP,)), *lrange(d, "relative")]),
    Claim("ladder: RoPE parts alone", "RoPE's parts alone score {} %, its 2-4 s bucket {} %",
          lambda d: [in_ctx(d, "rope").alone, cer(d, "rope")]),
    *[Claim(f"ladder table: {pe}, {v}", f"| {name}, {vname} | 2-4 | " + "{} | " * 5 + "{} [{}, {}] |",
            (lambda pe, v, suffix: lambda d: lrow(d, pe, v, suffix))(pe, v, suffix))
      for pe, name, suffix in (("rope", "RoPE", ""), ("rope", "RoPE + window ±2.5 s (chosen on dev)", "_window2p5"),
                               ("none", "`none`", ""), ("relative", "relative", ""), ("sinusoidal", "sinusoidal", ""),
                               ("sinusoidal", "sinusoidal + window ±2.5 s (chosen on dev)", "_window2p5"),
                               ("cape", "CAPE", ""))
      for v, vname in ((GAP, "gap 0.5 s" if name in ("RoPE",) else "gap"), (NOGAP, "no gap"))],
    Claim("ladder: none and CAPE windowed", "`none` + window {}-{}× and CAPE + window {}-{}× at 5-160 s, gap",
          lambda d: [*lrange(d, "none", suffix="_window2p5"), *lrange(d, "cape", suffix="_window2p5")]),
    Claim("ladder: parts alone",
          "RoPE {}-{} % (seed 3: {}-{}), `none` {}-{} %, relative {}-{} %, sinusoidal {}-{} % (seed 3: {}-{}), CAPE {}-{} %",
          lambda d: [*lalone(d, "rope", 2), *lalone(d, "rope", 3), *lalone(d, "none", 2), *lalone(d, "relative", 2),
                     *lalone(d, "sinusoidal", 2), *lalone(d, "sinusoidal", 3), *lalone(d, "cape", 2)]),
    Claim("ladder: RoPE seed 2 dev choice",
          "RoPE seed 2: plain {}, **window:2.5 {}**, window:5 {}, window:10 {}, chunked:20:4 {}, rope_ntk {}, "
          "rope_ntk@10 {}, rope_yarn {}; on test once window:2.5 {} % against plain {} %",
          lambda d: [ldev(d, "rope", 2, c) for c in SUFFIX] + [ltest(d, "rope", 2, "_window2p5"), ltest(d, "rope", 2)]),
    Claim("ladder: RoPE windows tie", "The windows of ±2.5 and ±5 s tie on dev ({} against {} %)",
          lambda d: [ldev(d, "rope", 2, "window:2.5"), ldev(d, "rope", 2, "window:5")]),
    Claim("ladder: RoPE seed 3 dev choice", "RoPE seed 3: plain {}, **window:2.5 {}**; test {} against {} %",
          lambda d: [ldev(d, "rope", 3), ldev(d, "rope", 3, "window:2.5"), ltest(d, "rope", 3, "_window2p5"),
                     ltest(d, "rope", 3)]),
    *[Claim(f"ladder: sinusoidal seed {s} dev choice",
            f"Sinusoidal seed {s}: plain {{}}, **window:2.5 {{}}**, window:5 {{}}; test {{}} against {{}} %",
            (lambda s: lambda d: [ldev(d, "sinusoidal", s, c) for c in ("plain", "window:2.5", "window:5")]
             + [ltest(d, "sinusoidal", s, "_window2p5"), ltest(d, "sinusoidal", s)])(s)) for s in S23],
    *[Claim(f"ladder: {pe} dev choice",
            f"{name} seeds 2 / 3: plain {{}} / {{}}, **window:2.5 {{}} / {{}}**; test {{}} / {{}} against {{}} / {{}} %",
            (lambda pe: lambda d: [ldev(d, pe, 2), ldev(d, pe, 3), ldev(d, pe, 2, "window:2.5"),
                                   ldev(d, pe, 3, "window:2.5"), ltest(d, pe, 2, "_window2p5"),
                                   ltest(d, pe, 3, "_window2p5"), ltest(d, pe, 2), ltest(d, pe, 3)])(pe))
      for pe, name in (("none", "`none`"), ("cape", "CAPE"))],
    Claim("ladder: relative seed 3 dev choice", "Relative seed 3: **plain {}**, window:2.5 {} ({} against {} %)",
          lambda d: [ldev(d, "relative", 3), ldev(d, "relative", 3, "window:2.5"), ldev(d, "relative", 3),
                     ldev(d, "relative", 3, "window:2.5")]),
    Fact("ladder: every dev choice", "Choices on dev (CER % of the no-gap recordings, all rungs, decoded whole",
         lambda d: _ladder_dev_choices(d, S2_4)),
    # what seeds 2-3 said before seed 4 was folded in (the README's "Seeds 2-3 said")
    Claim("ladder history: RoPE",
          "RoPE {}, {}, {}, {}, {} and {}× [{}, {}] from 5 to 160 s (gaps); with seed 4: {}× [{}, {}] at 160 s",
          lambda d: [lad(d, "rope", GAP, r, seeds=S23).ratio for r in RUNGS] + lci(d, "rope", seeds=S23)[1:]
          + lci(d, "rope")),
    Claim("ladder history: sinusoidal",
          "Sinusoidal {}× [{}, {}] at 160 s, +{} [+{}, +{}] above `none`; with seed 4: {}× [{}, {}], +{} [+{}, +{}]. "
          "Windowed {}×; with seed 4: {}×",
          lambda d: lci(d, "sinusoidal", seeds=S23) + ldiff(d, "sinusoidal", "none", seeds=S23) + lci(d, "sinusoidal")
          + ldiff(d, "sinusoidal", "none") + [lad(d, "sinusoidal", suffix="_window2p5", seeds=S23).ratio,
                                              lad(d, "sinusoidal", suffix="_window2p5").ratio]),
    Claim("ladder history: CAPE and relative",
          "CAPE {}-{}× (gaps), CAPE − `none` +{} [+{}, +{}] at 160 s; with seed 4: {}-{}×, +{} [+{}, +{}]. Relative {}-{}× "
          "(gaps), {}-{}× without; with seed 4: {}-{}× and {}-{}×",
          lambda d: [*lrange(d, "cape", seeds=S23), *ldiff(d, "cape", "none", seeds=S23), *lrange(d, "cape"),
                     *ldiff(d, "cape", "none"), *lrange(d, "relative", seeds=S23),
                     *lrange(d, "relative", (NOGAP,), seeds=S23), *lrange(d, "relative"), *lrange(d, "relative", (NOGAP,))]),
    Fact("ladder history: relative's window", "Relative's window: a tie, plain kept (seed 3, the only seed offered it); "
         "seed 4 chose the window", lambda d: _ladder_dev_choices(d, (3, 4))),
    Claim("ladder: RoPE a third more at 10 s", "keeps growing at every doubling ({}, {}, {}, {}× from 20 to 160 s, "
          "seeds 2-4). The long-form set's {}-{}× (per seed, seeds 0-4)",
          lambda d: [lad(d, "rope", GAP, r).ratio for r in RUNGS[2:]]
          + _minmax(in_ctx(d, "rope", "seeds", (s,)).ratio for s in S0_4)),
    Fact("ladder: RoPE grows at every doubling", "keeps growing at every doubling",
         lambda d: [f"{v} {a}->{b}" for v in (GAP, NOGAP) for a, b in zip(RUNGS, RUNGS[1:])
                    if lad(d, "rope", v, b).ratio <= lad(d, "rope", v, a).ratio]),
    Claim("ladder: sinusoidal every doubling",
          "at every doubling: {}, {}, {}, {}, {}, {}× from 5 to 160 s (seeds 2-4; per seed {}, {}, {}× at 160 s), +{} "
          "[+{}, +{}] above `none` at 160 s (paired, seeds 2-4 of both), where the long-form set gave {}× (seeds 0-3)",
          lambda d: [lad(d, "sinusoidal", GAP, r).ratio for r in RUNGS]
          + [lad(d, "sinusoidal", seeds=(s,)).ratio for s in S2_4] + ldiff(d, "sinusoidal", "none")
          + [in_ctx(d, "sinusoidal", "seeds", (0, 1, 2, 3)).ratio]),
    Fact("ladder: sinusoidal grows at every doubling", "Sinusoidal degrades steadily, far less than RoPE but at every doubling",
         lambda d: [f"{v} {a}->{b}" for v in (GAP, NOGAP) for a, b in zip(RUNGS, RUNGS[1:])
                    if lad(d, "sinusoidal", v, b).ratio <= lad(d, "sinusoidal", v, a).ratio]),
    Claim("ladder: CAPE against none",
          "CAPE degrades slightly more than `none`, not like it: {}× [{}, {}] against {}× [{}, {}] at 160 s (seeds 2-4), "
          "CAPE − `none` +{} [+{}, +{}] (paired; no gap +{} [+{}, +{}]); on the long-form set, seeds 0-4, +{} [+{}, +{}]",
          lambda d: [*lci(d, "cape"), *lci(d, "none"), *ldiff(d, "cape", "none"), *ldiff(d, "cape", "none", NOGAP),
                     *d.in_context_difference(runs(d, "cape", "seeds", S0_4), runs(d, "none", "seeds", S0_4))]),
    Fact("ladder: CAPE degrades more than none (paired)", "CAPE degrades slightly more than `none`, not like it",
         lambda d: supports("degrades more", ldiff(d, "cape", "none"), "ladder gap")
         + supports("degrades more", ldiff(d, "cape", "none", NOGAP), "ladder no gap")
         + supports("degrades more", d.in_context_difference(runs(d, "cape", "seeds", S0_4),
                                                             runs(d, "none", "seeds", S0_4)), "long-form")),
    Claim("ladder: none at 5 s", "some of the {}-{}× of `none` is present at 5 s already",
          lambda d: lrange(d, "none", (GAP, NOGAP))),
    Claim("ladder: window on none and CAPE",
          "gain {}-{} points on test (seeds 2-4), and their 160 s ratio falls from {}-{}× to {}-{}×",
          lambda d: [*_minmax(ltest(d, pe, s) - ltest(d, pe, s, "_window2p5") for pe in ("none", "cape") for s in S2_4),
                     *_minmax(lad(d, pe).ratio for pe in ("none", "cape")),
                     *_minmax(lad(d, pe, suffix="_window2p5").ratio for pe in ("none", "cape"))]),
    Claim("ladder: gap cue for relative", "relative's ratio is {}-{} lower with the silences",
          lambda d: _minmax(lad(d, "relative", NOGAP, r).ratio - lad(d, "relative", GAP, r).ratio for r in RUNGS)),
    Claim("ladder: recordings per rung", "(test: {}, {}, {}, {}, {}, {} recordings; dev: half)",
          lambda d: [len(lad(d, "rope", v, r, seeds=(2,)).rows) for v in (GAP,) for r in RUNGS]),
    Fact("ladder: dev half, both variants alike", "(test: 640, 320, 160, 80, 40, 20 recordings; dev: half)",
         lambda d: [f"{v} {r}" for v in (GAP, NOGAP) for r in RUNGS
                    if len(lad(d, "rope", v, r, seeds=(2,)).rows) != 2 * next(
                        x["utterances"] for x in d.series([lruns("rope", (2,))[0]], f"ladder_dev_{v}_{r}").runs[0].rows
                        if x["bucket"] == LONG)]),
    Fact("ladder: relative lower with gaps at every rung", "lower with the silences between utterances at every rung",
         _ladder_relative_gap_cue),
]


# ---------------------------------------------------------------- study/seeds/README.md

def _ic3(d, pe, seeds):
    r = in_ctx(d, pe, "seeds", seeds)
    return [r.ratio, r.ci_low, r.ci_high]


S0_2, S0_3 = (0, 1, 2), (0, 1, 2, 3)

SEEDS_NOTE_CLAIMS = [
    Claim("seeds: now", "seeds 0-4 of all five PEs: RoPE {}x [{}, {}], sinusoidal {}x [{}, {}], CAPE {}x [{}, {}], "
          "relative {}x [{}, {}], `none` {}x [{}, {}]**; RoPE is at {}x or above on every seed, every other PE at {}x or "
          "below",
          lambda d: [v for pe in ("rope", "sinusoidal", "cape", "relative", "none") for v in _ic3(d, pe, S0_4)]
          + [min(in_ctx(d, "rope", "seeds", (s,)).ratio for s in S0_4),
             max(in_ctx(d, pe, "seeds", (s,)).ratio for pe in ("sinusoidal", "cape", "relative", "none") for s in S0_4)]),
    Claim("seeds: 0-2", "over seeds 0-2 (2026-11-26): RoPE {}x [{}, {}] (seed 2 alone {}x), sinusoidal {}x [{}, {}], "
          "CAPE {}x [{}, {}], relative {}x [{}, {}], none {}x [{}, {}]",
          lambda d: _ic3(d, "rope", S0_2) + [in_ctx(d, "rope", "seeds", (2,)).ratio]
          + [v for pe in ("sinusoidal", "cape", "relative", "none") for v in _ic3(d, pe, S0_2)]),
    Claim("seeds: 0-3, CAPE and RoPE", "(seeds 0-3): CAPE {}x [{}, {}] (seed 3 alone {}x), RoPE {}x [{}, {}] (seed 3 "
          "alone {}x [{}, {}])",
          lambda d: _ic3(d, "cape", S0_3) + [in_ctx(d, "cape", "seeds", (3,)).ratio] + _ic3(d, "rope", S0_3)
          + _ic3(d, "rope", (3,))),
    Claim("seeds: 0-3, the others", "(seeds 0-3): sinusoidal {}x [{}, {}] (seed 3 alone {}x [{}, {}]), `none` {}x [{}, {}] "
          "(seed 3 alone {}x [{}, {}]), relative {}x [{}, {}] (seed 3 alone {}x [{}, {}])",
          lambda d: [v for pe in ("sinusoidal", "none", "relative") for v in _ic3(d, pe, S0_3) + _ic3(d, pe, (3,))]),
    Claim("seeds: 4 of RoPE and none", "(2026-11-26; seeds 0-4): RoPE {}x [{}, {}] (seed 4 alone {}x [{}, {}]), `none` "
          "{}x [{}, {}] (seed 4 alone {}x [{}, {}])",
          lambda d: [v for pe in ("rope", "none") for v in _ic3(d, pe, S0_4) + _ic3(d, pe, (4,))]),
    Claim("seeds: 4 of relative", "Seed 4 of relative: {}x [{}, {}] over seeds 0-4 (seed 4 alone {}x [{}, {}])",
          lambda d: _ic3(d, "relative", S0_4) + _ic3(d, "relative", (4,))),
    Claim("seeds: 4 of sinusoidal", "Seed 4 of sinusoidal: {}x [{}, {}] over seeds 0-4 (seed 4 alone {}x [{}, {}])",
          lambda d: _ic3(d, "sinusoidal", S0_4) + _ic3(d, "sinusoidal", (4,))),
    Claim("seeds: 4 of CAPE", "the last one): {}x [{}, {}] over seeds 0-4 (seed 4 alone {}x [{}, {}])",
          lambda d: _ic3(d, "cape", S0_4) + _ic3(d, "cape", (4,))),
]


# ---------------------------------------------------------------- study/finetune/README.md

FT = "finetune"
FT_RUNS = ("source_rope", "rope_shortft300", "rope_finetune300", "rope_yarn_finetune300", "rope_pi_finetune300")
FT_SEEDS = (2, 3, 4)  # every seed of the fine-tune control (seed 4 since 2026-11-28; S23 before)


def ftr(name, seeds=FT_SEEDS):
    return tuple(str(STUDY / FT / f"{name}_ctc_s{s}") for s in seeds)


def ftc(d, name, bucket="2-4", seeds=FT_SEEDS, suffix=""):
    """CER % of a fine-tune run (seed mean): a test bucket, or LONG for the 160 s set."""
    return long_(d, name, suffix, folder=FT, seeds=seeds) if bucket == LONG else \
        cer(d, name, bucket, "test" + suffix, FT, seeds)


def ftic(d, name, seeds=FT_SEEDS, window=False):
    """In-context result at 160 s; ``window``: both decodings with the ±5 s window."""
    return d.in_context(ftr(name, seeds), "longform_window5" if window else "longform",
                        "test_window5" if window else "test").pooled


def ftdiff(d, a, b, set_name="longform", bucket=LONG, seeds=FT_SEEDS):
    return list(d.difference(ftr(a, seeds), ftr(b, seeds), set_name, bucket))


def _ft_row(d, name, seed):
    c, w = ftic(d, name, (seed,)), ftic(d, name, (seed,), window=True)
    return [ftc(d, name, "2-4", (seed,)), ftc(d, name, "32-64", (seed,)), ftc(d, name, LONG, (seed,)),
            c.ratio, c.ci_low, c.ci_high, ftc(d, name, LONG, (seed,), "_window5"), w.ratio, w.ci_low, w.ci_high]


def _ratio_ci(c):
    """An in-context result -> [ratio, CI low, CI high]."""
    return [c.ratio, c.ci_low, c.ci_high]


def _ft_window_best(d):
    """For every model, the window's 160 s CER is below the plain decoding's (seeds 2-4; the
    yardstick seed 2)."""
    bad = []
    for name, seeds in [(n, FT_SEEDS) for n in (*FT_RUNS, "rope_yardstick40")]:
        w = ftc(d, name, LONG, seeds, "_window5")
        p = ftc(d, name, LONG, seeds)
        if not w < p:
            bad.append(f"{name}: window {w:.2f} not below plain {p:.2f}")
    return bad


FT_ROW_NAMES = {"source_rope": "(not fine-tuned) | none", "rope_shortft300":
                "the study's 1-5 s utterances (continuation control) | none",
                "rope_finetune300": "utterances joined to ≤ 40 s | none",
                "rope_yarn_finetune300": "joined to ≤ 40 s | YaRN, s = 8, α 1, β 10",
                "rope_pi_finetune300": "joined to ≤ 40 s | PI, s = 8",
                "rope_yardstick40": "(from scratch, 1100 steps on utterances joined to ≤ 40 s) | none"}

FINETUNE_NOTE_CLAIMS = [
    *[Claim(f"finetune seed 2: {n}", f"| `{n}_ctc_s2` | {FT_ROW_NAMES[n]} | {{}} | {{}} | {{}} | {{}}× [{{}}, {{}}] | "
            "{} | {}× [{}, {}] |", (lambda n: lambda d: _ft_row(d, n, 2))(n))
      for n in (*FT_RUNS, "rope_yardstick40") if n not in ("rope_shortft300", "rope_finetune300")],
    *[Claim(f"finetune seed 2: {n}", f"| `{n}_ctc_s2` | {FT_ROW_NAMES[n]} | {{}} | {{}} | **{{}}** | {{}}× [{{}}, {{}}] | "
            "{} | {}× [{}, {}] |" if n == "rope_finetune300" else
            f"| `{n}_ctc_s2` | {FT_ROW_NAMES[n]} | {{}} | {{}} | {{}} | {{}}× [{{}}, {{}}] | **{{}}** | {{}}× [{{}}, {{}}] |",
            (lambda n: lambda d: _ft_row(d, n, 2))(n)) for n in ("rope_shortft300", "rope_finetune300")],
    *[Claim(f"finetune seed {seed}: {n}", f"| `{n}_ctc_s{seed}` | {{}} | {{}} | " + ("**{}**" if n == "rope_finetune300" else "{}")
            + " | {}× [{}, {}] | " + ("**{}**" if n == "rope_shortft300" else "{}") + " | {}× [{}, {}] |",
            (lambda n, seed: lambda d: _ft_row(d, n, seed))(n, seed)) for seed in (3, 4) for n in FT_RUNS],
    *[Claim(f"finetune seed {seed}: rope_yardstick40", f"| `rope_yardstick40_ctc_s{seed}` | {{}} | {{}} | {{}} | {{}}× "
            "[{}, {}] | {} | {}× [{}, {}] |", (lambda seed: lambda d: _ft_row(d, "rope_yardstick40", seed))(seed))
      for seed in (3, 4)],
    Claim("finetune: pooled answer",
          "in context at 160 s: plain fine-tune {}× [{}, {}], YaRN {}× [{}, {}], PI {}× [{}, {}] (crossed CIs: one draw "
          "of recordings for every seed, and a draw of seeds); CER 160 s {}, {}, {} % against {} % for the window on the "
          "models as trained; paired over the recordings, seeds 2-4: YaRN − plain fine-tune +{} [+{}, +{}] points, "
          "PI − plain fine-tune +{} [+{}, +{}], windowed fine-tune − windowed source {} [{}, {}], windowed continuation "
          "− windowed source {} [{}, {}];",
          lambda d: [v for n in ("rope_finetune300", "rope_yarn_finetune300", "rope_pi_finetune300")
                     for v in (ftic(d, n).ratio, ftic(d, n).ci_low, ftic(d, n).ci_high)]
          + [ftc(d, n, LONG) for n in ("rope_finetune300", "rope_yarn_finetune300", "rope_pi_finetune300")]
          + [ftc(d, "source_rope", LONG, suffix="_window5")]
          + ftdiff(d, "rope_yarn_finetune300", "rope_finetune300") + ftdiff(d, "rope_pi_finetune300", "rope_finetune300")
          + ftdiff(d, "rope_finetune300", "source_rope", "longform_window5")
          + ftdiff(d, "rope_shortft300", "source_rope", "longform_window5")),
    Claim("finetune: pooled answer, seeds 2 and 3 alone",
          "seeds 2 and 3 alone gave +{}, +{}, {} and {})",
          lambda d: [ftdiff(d, "rope_yarn_finetune300", "rope_finetune300", seeds=S23)[0],
                     ftdiff(d, "rope_pi_finetune300", "rope_finetune300", seeds=S23)[0],
                     ftdiff(d, "rope_finetune300", "source_rope", "longform_window5", seeds=S23)[0],
                     ftdiff(d, "rope_shortft300", "source_rope", "longform_window5", seeds=S23)[0]]),
    Claim("finetune: the window helps the trained-further models",
          "with it the 300 more steps do help: {} % on the plain fine-tune and {} % on the continuation control against {} %",
          lambda d: [ftc(d, n, LONG, suffix="_window5") for n in ("rope_finetune300", "rope_shortft300", "source_rope")]),
    Fact("finetune: rescalings worse than the plain fine-tune, paired",
         "both are worse than fine-tuning plain RoPE on the same long inputs",
         lambda d: supports("worse", ftdiff(d, "rope_yarn_finetune300", "rope_finetune300"), "YaRN")
         + supports("worse", ftdiff(d, "rope_pi_finetune300", "rope_finetune300"), "PI")),
    Fact("finetune: 300 more steps help the windowed models, paired", "with it the 300 more steps do help",
         lambda d: supports("better", ftdiff(d, "rope_finetune300", "source_rope", "longform_window5"), "fine-tune")
         + supports("better", ftdiff(d, "rope_shortft300", "source_rope", "longform_window5"), "continuation")),
    Fact("finetune: decoded whole, nothing beats the window on the model as trained",
         "decoded whole, neither fine-tuning nor training long from scratch",
         lambda d: [f"{n}: {ftc(d, n, LONG, seeds):.2f} % whole" for n, seeds in
                    [(n, FT_SEEDS) for n in (*FT_RUNS[1:], "rope_yardstick40")]
                    if ftc(d, n, LONG, seeds) <= ftc(d, "source_rope", LONG, seeds, "_window5")]),
    Claim("finetune: continuation", "the continuation control stays at {} % at 160 s ({}× in context; seed 3 {} %, {}×). "
          "On seed 2 they improve the short utterances ({} → {} % at 2-4 s), so the fine-tunes' better short CER "
          "({}-{} %) is the extra training, not the long inputs; on seed 3 they do not ({} → {} %; the fine-tunes {}-{} %)",
          lambda d: [ftc(d, "rope_shortft300", LONG, (2,)), ftic(d, "rope_shortft300", (2,)).ratio,
                     ftc(d, "rope_shortft300", LONG, (3,)), ftic(d, "rope_shortft300", (3,)).ratio,
                     ftc(d, "source_rope", "2-4", (2,)), ftc(d, "rope_shortft300", "2-4", (2,)),
                     *_minmax(ftc(d, n, "2-4", (2,)) for n in FT_RUNS[2:4]),
                     ftc(d, "source_rope", "2-4", (3,)), ftc(d, "rope_shortft300", "2-4", (3,)),
                     *_minmax(ftc(d, n, "2-4", (3,)) for n in FT_RUNS[2:4])]),
    Fact("finetune: 300 more steps alone do not help the long inputs", "300 more steps alone do not help the long inputs",
         lambda d: supports("no better", ftdiff(d, "rope_shortft300", "source_rope"), "continuation − source, 160 s")),
    Claim("finetune: long inputs fix RoPE",
          "joined to ≤ 40 s, 160 s goes {} → {} % and 32-64 s {} → {} % against the continuation, at no cost at 2-4 s "
          "({} against {} %; seed 3: {} → {} %, {} against {} %). Still {}× [{}, {}] in context at 160 s (seed 3 {}×)",
          lambda d: [ftc(d, "rope_shortft300", LONG, (2,)), ftc(d, "rope_finetune300", LONG, (2,)),
                     ftc(d, "rope_shortft300", "32-64", (2,)), ftc(d, "rope_finetune300", "32-64", (2,)),
                     ftc(d, "rope_finetune300", "2-4", (2,)), ftc(d, "rope_shortft300", "2-4", (2,)),
                     ftc(d, "rope_shortft300", LONG, (3,)), ftc(d, "rope_finetune300", LONG, (3,)),
                     ftc(d, "rope_finetune300", "2-4", (3,)), ftc(d, "rope_shortft300", "2-4", (3,)),
                     ftic(d, "rope_finetune300", (2,)).ratio, ftic(d, "rope_finetune300", (2,)).ci_low,
                     ftic(d, "rope_finetune300", (2,)).ci_high, ftic(d, "rope_finetune300", (3,)).ratio]),
    Claim("finetune: YaRN worse",
          "({} against {} % at 160 s, {}× against {}×; seed 3 {} against {} %; seeds 2-4, paired: +{} [+{}, +{}] points)",
          lambda d: [ftc(d, "rope_yarn_finetune300", LONG, (2,)), ftc(d, "rope_finetune300", LONG, (2,)),
                     ftic(d, "rope_yarn_finetune300", (2,)).ratio, ftic(d, "rope_finetune300", (2,)).ratio,
                     ftc(d, "rope_yarn_finetune300", LONG, (3,)), ftc(d, "rope_finetune300", LONG, (3,)),
                     *ftdiff(d, "rope_yarn_finetune300", "rope_finetune300")]),
    Fact("finetune: YaRN worse, paired", "**YaRN is worse than the plain fine-tune**",
         lambda d: supports("worse", ftdiff(d, "rope_yarn_finetune300", "rope_finetune300"))),
    Claim("finetune: PI", "position interpolation is flat ({}×; seed 3 {}×) but worse inside the training "
          "lengths** ({} % at 2-4 s against {} %; seed 3 {} against {} %; seeds 2-4, paired: +{} [+{}, +{}] points at "
          "2-4 s, +{} [+{}, +{}] at 0-2 s)",
          lambda d: [ftic(d, "rope_pi_finetune300", (2,)).ratio, ftic(d, "rope_pi_finetune300", (3,)).ratio,
                     ftc(d, "rope_pi_finetune300", "2-4", (2,)), ftc(d, "rope_finetune300", "2-4", (2,)),
                     ftc(d, "rope_pi_finetune300", "2-4", (3,)), ftc(d, "rope_finetune300", "2-4", (3,)),
                     *ftdiff(d, "rope_pi_finetune300", "rope_finetune300", "test", "2-4"),
                     *ftdiff(d, "rope_pi_finetune300", "rope_finetune300", "test", "0-2")]),
    Fact("finetune: PI worse inside the training lengths, paired", "but worse inside the training lengths",
         lambda d: supports("worse", ftdiff(d, "rope_pi_finetune300", "rope_finetune300", "test", "2-4"), "2-4")),
    Claim("finetune: yardstick",
          "flat but not better** (seeds 2-4): {} % at 160 s, {}× [{}, {}] in context (seed 4 alone {}×), best at its "
          "own training lengths (32-64 s {} %) and worse on short utterances ({} % at 2-4 s against the source's {} %; "
          "+{} [+{}, +{}] points, paired; why was not investigated). The fine-tune on joined inputs does better in 300 "
          "steps ({} %; yardstick − fine-tune +{} [+{}, +{}] points, paired; seed 2 alone: {} against {} %, +{})",
          lambda d: [ftc(d, "rope_yardstick40", LONG), *_ratio_ci(ftic(d, "rope_yardstick40")),
                     ftic(d, "rope_yardstick40", (4,)).ratio,
                     ftc(d, "rope_yardstick40", "32-64"), ftc(d, "rope_yardstick40", "2-4"), ftc(d, "source_rope", "2-4"),
                     *ftdiff(d, "rope_yardstick40", "source_rope", "test", "2-4"),
                     ftc(d, "rope_finetune300", LONG), *ftdiff(d, "rope_yardstick40", "rope_finetune300"),
                     ftc(d, "rope_yardstick40", LONG, (2,)), ftc(d, "rope_finetune300", LONG, (2,)),
                     ftdiff(d, "rope_yardstick40", "rope_finetune300", seeds=(2,))[0]]),
    Fact("finetune: yardstick best at its own training lengths", "best at its own training lengths",
         lambda d: [] if ftc(d, "rope_yardstick40", "32-64") < min(ftc(d, "rope_yardstick40", b) for b in ("2-4", LONG))
         else ["the yardstick's 32-64 s CER is not its lowest"]),
    Fact("finetune: yardstick not better, paired", "The fine-tune on joined inputs does better in 300 steps",
         lambda d: supports("worse", ftdiff(d, "rope_yardstick40", "rope_finetune300"))
         + supports("worse", ftdiff(d, "rope_yardstick40", "source_rope", "test", "2-4"), "2-4 s")),
    Claim("finetune: window best",
          "on the continuation control {} % at 160 s, on the untouched model {} %, on the fine-tunes {}-{} % (PI {} %); "
          "every windowed model is flat in context ({}-{}×). Seed 3: {}, {}, {}-{} % (PI {} %), {}-{}×",
          lambda d: [v for s in S23 for v in
                     [ftc(d, "rope_shortft300", LONG, (s,), "_window5"), ftc(d, "source_rope", LONG, (s,), "_window5"),
                      *_minmax(ftc(d, n, LONG, (s,), "_window5") for n in FT_RUNS[2:4]),
                      ftc(d, "rope_pi_finetune300", LONG, (s,), "_window5"),
                      *_minmax(ftic(d, n, (s,), True).ratio for n in FT_RUNS)]]),
    Fact("finetune: the window the best decoding of each model", "The window stays the best long-input decoding",
         _ft_window_best),
    Claim("finetune: superseded 60-step runs",
          "160 s plain {} % ({}×), YaRN {} % ({}×), PI {} % ({}×, ~12 % at every length), windowed {}-{} %; no continuation "
          "control, so the 2-4 s cost seen then ({} against {} %)",
          lambda d: [v for n in ("rope_finetune", "rope_yarn_finetune", "rope_pi_finetune")
                     for v in (ftc(d, n, LONG, (2,)), ftic(d, n, (2,)).ratio)]
          + _minmax(ftc(d, n, b, (2,), "_window5") for n in ("rope_finetune", "rope_yarn_finetune", "rope_pi_finetune")
                    for b in (LONG,))
          + [ftc(d, "rope_finetune", "2-4", (2,)), ftc(d, "source_rope", "2-4", (2,))]),
    Fact("finetune: superseded PI ~12 % at every length", "~12 % at every length",
         lambda d: [f"{b}: {ftc(d, 'rope_pi_finetune', b, (2,)):.1f}" for b in TEST_BUCKETS
                    if abs(ftc(d, "rope_pi_finetune", b, (2,)) - 12) >= 1]),      # "~": within a point
]


# ---------------------------------------------------------------- study/remedies_report/README.md
# (the training remedies, moved out of RESULTS.md, which keeps a summary)

_MOVED_TO_REMEDIES_NOTE = (
    "training remedies: rope plain", "training remedies: rope posscale", "training remedies: rope randpos",
    "training remedies: rope concat", "training remedies: sinusoidal plain", "training remedies: sinusoidal posscale",
    "training remedies: sinusoidal randpos", "training remedies: sinusoidal concat", "joined RoPE",
    "joined RoPE: best plainly decoded RoPE model at 32-64 s", "posscale and randpos, RoPE",
    "randomized positions, RoPE", "window the best RoPE decoding at 160 s",
    "sinusoidal: every training remedy helps at 160 s", "window stays the answer", "sinusoidal training remedies",
    "joined sinusoidal better from 2 s")
REMEDIES_NOTE_CLAIMS = [c for c in CLAIMS if c.name in _MOVED_TO_REMEDIES_NOTE] + [
    Claim("training remedies: sinusoidal, paired",
          "each is better than the plain model on paired intervals (position scaling {} [{}, {}], randomized positions "
          "{} [{}, {}], joined {} [{}, {}] points)",
          lambda d: [v for r in ("posscale", "randpos", "concat") for v in
                     d.difference(runs(d, f"sinusoidal_{r}", "remedies"), runs(d, "sinusoidal"), "longform", LONG)]),
    Fact("training remedies: sinusoidal better at 160 s, paired", "each is better than the plain model on paired intervals",
         lambda d: [e for r in ("posscale", "randpos", "concat") for e in supports(
             "better", d.difference(runs(d, f"sinusoidal_{r}", "remedies"), runs(d, "sinusoidal"), "longform", LONG), r)]),
]
def _study_info(d, key):
    """min, max of a run_info.json value over the 24 runs of the main study."""
    return _minmax(d.series([p], "test").runs[0].info[key] for pe in STUDY_PES for p in runs(d, pe))


def _relative_best_from_8s_paired(d):
    """From 8 s on (and at 160 s) relative's CER is below every other PE's, each paired CI below 0."""
    out = []
    for b in ("8-16", "16-32", "32-64", LONG):
        s = "longform" if b == LONG else "test"
        out += supports("best", [diff(d, "relative", pe, s, b) for pe in STUDY_PES if pe != "relative"], b)
    return out


CLAIMS = [c for c in CLAIMS if c.name not in _MOVED_TO_REMEDIES_NOTE] + [
    Claim("limits: the model and its data",
          "a {}-{} M-parameter Transformer + CTC trained for 1,100 steps on {} h of ≤ {} s utterances",
          lambda d: [v / 1e6 for v in _study_info(d, "parameters")] + [_study_info(d, "train_hours")[1],
                                                                       _study_info(d, "train_max_duration")[1]]),
    Claim("recommendation: model size", "For a small model ({}-{} M parameters)",
          lambda d: [v / 1e6 for v in _study_info(d, "parameters")]),
    Claim("answer: RoPE on the ladder",
          "RoPE's in-context ratio is {}× at 5 s, {}× at 10 s, {}× at 40 s and {}× [{}, {}] at 160 s (seeds 2-4; 2-3: {}×)",
          lambda d: [lad(d, "rope", GAP, r).ratio for r in (5, 10, 40)] + lci(d, "rope")
          + [lad(d, "rope", seeds=S23).ratio]),
    Claim("answer: sinusoidal on the ladder", "sinusoidal {}× to {}× (+{} [+{}, +{}] above `none` at 160 s, paired)",
          lambda d: [*lrange(d, "sinusoidal"), *ldiff(d, "sinusoidal", "none")]),
    Fact("answer: sinusoidal grows at every doubling", "sinusoidal's, Shaw's, T5's and conv's grow at every doubling too",
         lambda d: [f"{v} {a}->{b}" for v in (GAP, NOGAP) for a, b in zip(RUNGS, RUNGS[1:])
                    if lad(d, "sinusoidal", v, b).ratio <= lad(d, "sinusoidal", v, a).ratio]
         + supports("degrades more", ldiff(d, "sinusoidal", "none"), "vs none")
         + [f"{pe} seed {s}: ratios {r}" for pe in ("shaw", "t5", "conv") for s in (0, 1)
            for r in [_plain_ratios(d, pe, s)] if not all(y > x for x, y in zip(r, r[1:]))]),
    Fact("answer: ALiBi and REM hardly", "relative's, ALiBi's and REM's hardly",
         lambda d: [f"{pe} seed {s} at {r} s: {x:.3f}" for pe in ("alibi", "rem") for s in (0, 1)
                    for r, x in zip(RUNGS, _plain_ratios(d, pe, s))
                    if x > lrange(d, "cape", (GAP, NOGAP))[1]]),
    Claim("answer: the seven at 160 s", "At 160 s (seeds 0-1): Shaw {}×, T5 {}×, conv\n{}×, ALiBi {}×, REM {}×, "
          "learned {}×, √D sinusoidal {}×",
          lambda d: [_seeds01_plain(d, pe)[0] for pe in ("shaw", "t5", "conv", "alibi", "rem", "learned_wrap",
                                                         "sinusoidal_sqrtd")]),
    Claim("answer: the flat PEs on the ladder",
          "CAPE ≤ {}×, `none` ≤ {}×, relative ≤ {}× at every rung (relative {}× without the 0.5 s gaps",
          lambda d: [lrange(d, "cape", (GAP, NOGAP))[1], lrange(d, "none", (GAP, NOGAP))[1], lrange(d, "relative")[1],
                     lrange(d, "relative", (NOGAP,))[1]]),
    Fact("answer: the gap helps relative only", "the one PE the gap helps at every rung", _gap_helps_relative_only),
    Claim("remedies answer: RoPE on the test ladder",
          "On the test ladder: {} / {} / {} % against {} / {} / {} % plain (no-gap recordings, seeds 2 / 3 / 4;",
          lambda d: [ltest(d, "rope", s, "_window2p5") for s in S2_4] + [ltest(d, "rope", s) for s in S2_4]),
    Claim("remedies answer: the window for the others",
          "`window:2.5` is chosen on dev for sinusoidal, `none` and CAPE too ({}-{} points better on test)",
          lambda d: _minmax(ltest(d, pe, s) - ltest(d, pe, s, "_window2p5") for pe in ("sinusoidal", "none", "cape")
                            for s in S2_4)),
    Fact("remedies answer: every dev choice", "for relative: a tie on seed 3, chosen on seed 4",
         lambda d: _ladder_dev_choices(d, S2_4)),
    Fact("relative the most accurate from 8 s, paired", "Relative is flat and the most accurate model from 8 s on",
         _relative_best_from_8s_paired),
    Fact("relative tied with RoPE up to 8 s, paired", "tied with RoPE up to 8 s",
         lambda d: [e for b in ("0-2", "2-4", "4-8") for e in supports("like", diff(d, "relative", "rope", "test", b), b)]),
    Fact("Conformer beats the relative Transformer from 2 s, paired", "(from 2 s on paired CIs; at 0-2 s four are within them)",
         lambda d: [e for pe in CONFORMER_PES for b in (*TEST_BUCKETS[1:], LONG) for e in supports(
             "better", d.difference(runs(d, pe, "arms/conformer"), runs(d, "relative"), "longform" if b == LONG else "test",
                                    b), f"{pe} {b}")]
         + ([] if sum(1 for pe in CONFORMER_PES if supports("better", d.difference(
             runs(d, pe, "arms/conformer"), runs(d, "relative"), "test", "0-2"))) == 4 else ["not four within at 0-2 s"])),
    Fact("70 ms: CAPE worse than relative and none, paired", "CAPE is 5× worse than relative and worse than `none`",
         lambda d: supports("worse", d.difference(runs(d, "cape", "arms/frontend70"), runs(d, "relative", "arms/frontend70"),
                                                  "test", "2-4"), "vs relative")
         + supports("worse", diff(d, "cape", "none", "test", "2-4", "arms/frontend70"), "vs none 2-4 s")
         + supports("worse", diff(d, "cape", "none", "longform", LONG, "arms/frontend70"), "vs none 160 s")),
    Fact("70 ms 3x: sinusoidal the best of three inside the training lengths, paired",
         "is the best of the three inside the training lengths",
         lambda d: [e for b in ("0-2", "2-4") for e in supports(
             "best", [diff(d, "sinusoidal", o, "test", b, F70L) for o in ("none", "cape")], b)]),
    Fact("70 ms 3x: CAPE no better than none, paired", "attention like `none`'s, no better than `none`",
         lambda d: supports("no better", diff(d, "cape", "none", "test", "2-4", F70L), "2-4 s")
         + supports("no better", diff(d, "cape", "none", "longform", LONG, F70L), "160 s")),
    Claim("training remedies: summary", "sinusoidal gains {}-{} points at 160 s from them (paired CIs exclude 0)",
          lambda d: _minmax(long_(d, "sinusoidal") - long_(d, f"sinusoidal_{r}", folder="remedies")
                            for r in ("posscale", "randpos", "concat"))),
    Fact("training remedies: summary, paired", "(paired CIs exclude 0)",
         lambda d: [e for r in ("posscale", "randpos", "concat") for e in supports(
             "better", d.difference(runs(d, f"sinusoidal_{r}", "remedies"), runs(d, "sinusoidal"), "longform", LONG), r)]),
]


# ---------------------------------------------------------------- study/attention/README.md
ATTENTION_RUNGS = (5, 10, 20, 40, 80)  # the README's rungs before the 160 s one
ATTENTION_NOTE_CLAIMS = [
    Claim("RoPE s4 local share per rung",
          "keeps {} % [{}, {}] of\nits attention within ±0.5 s of the query on 2-3 s utterances decoded alone, and the share "
          "falls at\nevery rung of the length ladder: {} % on the 5 s rung, {} % at 10 s, {} % at 20 s, {} % at\n40 s, {} % "
          "at 80 s, {} % [{}, {}] at 160 s, where its mean attended distance is {} s of\n{} s.",
          lambda d: [*_pct(rope_s4_attention("ladder_test_alone"))[:3],
                     *[100 * rope_s4_attention(f"ladder_test_gap500ms_{r}")[0] for r in ATTENTION_RUNGS],
                     *_pct(rope_s4_attention("ladder_test_gap500ms_160"))[:3],
                     rope_s4_attention("ladder_test_gap500ms_160", "mean_distance_s")[0],
                     rope_s4_attention("ladder_test_gap500ms_160", "duration")[0]]),
    Claim("RoPE s3 agrees with s4", "falls the same way, from {} % on the 2-3 s utterances to {} % at 160 s",
          lambda d: [100 * run_attention("rope_ctc_s3", "ladder_test_alone")[0],
                     100 * run_attention("rope_ctc_s3", "ladder_test_gap500ms_160")[0]]),
    Claim("RoPE s3 local share per rung",
          "79.4 % [78.9, 79.9] within ±0.5 s on the 2-3 s utterances".replace("79.4 % [78.9, 79.9]", "{} % [{}, {}]")
          + ", {} % on the\n5 s rung, {} % at 10 s, {} % at 20 s, {} % at 40 s, {} % at 80 s and {} % [{}, {}] at\n160 s, "
          "where its mean attended distance is {} s of {} s.",
          lambda d: [*_pct(run_attention("rope_ctc_s3", "ladder_test_alone"))[:3],
                     *[100 * run_attention("rope_ctc_s3", f"ladder_test_gap500ms_{r}")[0] for r in ATTENTION_RUNGS],
                     *_pct(run_attention("rope_ctc_s3", "ladder_test_gap500ms_160"))[:3],
                     run_attention("rope_ctc_s3", "ladder_test_gap500ms_160", "mean_distance_s")[0],
                     run_attention("rope_ctc_s3", "ladder_test_gap500ms_160", "duration")[0]]),
    Fact("RoPE s3: falls at every rung, below seed 4 at each", "the same fall as seed 4's, a\nlittle lower at every rung",
         lambda d: _falls_below_s4("rope_ctc_s3")),
    Fact("RoPE s3 attention: the rate lane's retrain, not the archived run", "which does **not** reproduce the archived "
         "`study/seeds/rope_ctc_s3`",
         lambda d: [] if not _rate_retrained("rope_ctc_s3")["reproduced"] else ["rope_ctc_s3 reproduced"]),
    Claim("relative s4 local share and distance",
          "it keeps {} % [{}, {}] of its attention within ±0.5 s on the 2-3 s utterances and still {} %\n[{}, {}] at "
          "160 s, where its mean attended distance is {} s of {} s (RoPE: {} s)",
          lambda d: _local_and_distance("relative_ctc_s4", "rope_ctc_s4")),
    Fact("relative spreads less than RoPE", "attention spreads with length far less than RoPE's",
         lambda d: [] if (s4_attention("relative", "ladder_test_alone")[0] - s4_attention("relative", "ladder_test_gap500ms_160")[0]
                          < 0.5 * (rope_s4_attention("ladder_test_alone")[0] - rope_s4_attention("ladder_test_gap500ms_160")[0])
                          and s4_attention("relative", "ladder_test_gap500ms_160")[1]
                          > rope_s4_attention("ladder_test_gap500ms_160")[2]) else ["relative's local share falls as far as RoPE's"]),
    Claim("relative s3 local share and distance",
          "is more local still: {} % [{}, {}] within ±0.5 s on the 2-3 s utterances, {} % [{}, {}]\nat 160 s, a mean "
          "attended distance of {} s of {} s (RoPE seed 3: {} s)",
          lambda d: _local_and_distance("relative_ctc_s3", "rope_ctc_s3")),
    Fact("relative s3 more local than s4, and half local at 160 s", "is more local still",
         lambda d: [f"{x}: s3 not above s4" for x in ("ladder_test_alone", "ladder_test_gap500ms_160")
                    if not run_attention("relative_ctc_s3", x)[1] > run_attention("relative_ctc_s4", x)[2]]
         + ([] if run_attention("relative_ctc_s3", "ladder_test_gap500ms_160")[1] > 0.5 else ["s3 below half at 160 s"])),
    Fact("relative s3 attention: the rate lane's retrain, not the archived run", "which does **not** reproduce the "
         "archived\n`study/seeds/relative_ctc_s3`",
         lambda d: [] if not _rate_retrained("relative_ctc_s3")["reproduced"] else ["relative_ctc_s3 reproduced"]),
    Fact("relative half local at 160 s", "half of it stays local",
         lambda d: [] if s4_attention("relative", "ladder_test_gap500ms_160")[1] > 0.5
         else ["relative's 160 s local share CI reaches below 0.5"]),
    *_uniform("sinusoidal_ctc_s4", "at 160 s its mean attended distance is {} s of {} s, a third of the\nrecording as for "
                 "uniform attention, and {} % [{}, {}] of its attention lies within ±0.5 s of\nthe query ({} % [{}, {}] "
                 "on the 2-3 s utterances)", "a third of the recording as for uniform attention"),
    *_uniform("sinusoidal_ctc_s3", "a mean attended distance of {} s of {} s, and {} % [{}, {}] of its attention "
              "within\n±0.5 s of the query ({} % [{}, {}] on the 2-3 s utterances)", "is just as uniform at\n160 s"),
    Fact("sinusoidal s3 attention: the rate lane's retrain, not the archived run", "which does **not**\nreproduce the "
         "archived `study/seeds/sinusoidal_ctc_s3`",
         lambda d: [] if not _rate_retrained("sinusoidal_ctc_s3")["reproduced"] else ["sinusoidal_ctc_s3 reproduced"]),
    *_uniform("none_ctc_s4", "at 160 s its mean attended distance is {} s\nof {} s, a third of the recording, and {} % "
                 "[{}, {}] of its attention lies within ±0.5 s of the\nquery ({} % [{}, {}] on the 2-3 s utterances)",
                 "uniform on long inputs too"),
    *_uniform("none_ctc_s3", "at 160 s it attends {} s away on average, of {} s, with {} % [{}, {}]\nof its attention "
              "within ±0.5 s of the query ({} % [{}, {}] on the 2-3 s utterances)", "attends as uniformly"),
    Fact("none s3 attention: the rate lane's retrain, not the archived run", "which does **not** reproduce\nthe archived "
         "`study/seeds/none_ctc_s3`",
         lambda d: [] if not _rate_retrained("none_ctc_s3")["reproduced"] else ["none_ctc_s3 reproduced"]),
    *_uniform("cape_ctc_s4", "its mean attended distance at 160 s is {} s of {} s (a third of the recording),\nand {} % "
                 "[{}, {}] of its attention lies within ±0.5 s of the query there ({} % [{}, {}]\non the 2-3 s utterances)",
                 "uniform on long inputs as\nwell"),
    *_uniform("cape_ctc_s3", "its attention lies {} s from the query on average at 160 s, of {} s, {} % [{},\n{}] "
              "of it within ±0.5 s ({} % [{}, {}] on the 2-3 s utterances)", "is as uniform"),
    Fact("cape s3 attention: the rate lane's retrain, not the archived run", "which does **not**\nreproduce the "
         "archived `study/seeds/cape_ctc_s3`",
         lambda d: [] if not _rate_retrained("cape_ctc_s3")["reproduced"] else ["cape_ctc_s3 reproduced"]),
    *_uniform("conv_ctc_s0", "at 160 s it attends {} s away on average, of {} s (a third of the\nrecording), "
              "with {} % [{}, {}] of its attention within ±0.5 s of the query ({} % [{}, {}]\non the 2-3 s "
              "utterances)", "uniform on long inputs, as `none`"),
    Fact("conv s0 attention: the lane's retrain, not the archived run", "(the lane's retraining, which does **not**\n"
         "reproduce the archived `study/runs/conv_ctc_s0`",
         lambda d: ["conv_ctc_s0 reproduced"] if _more_pes_retrained("conv", 0)["reproduced"] else []),
    *_uniform("learned_wrap_ctc_s0", "at 160 s its mean distance from the query is {} s of {} s (a\nthird of the "
              "recording), and {} % [{}, {}] of its attention falls within ±0.5 s of the query\n({} % [{}, {}] on the "
              "2-3 s utterances)", "spread evenly\nover long inputs, like `none` and conv"),
    Fact("learned s0 attention: the lane's retrain, not the archived run", "(the lane's retraining, which does **not** "
         "reproduce the\narchived `study/runs/learned_wrap_ctc_s0`",
         lambda d: ["learned_wrap_ctc_s0 reproduced"] if _more_pes_retrained("learned_wrap", 0)["reproduced"] else []),
    *_uniform("learned_wrap_ctc_s1", "{} s from the query on average at 160 s, of {} s, and {} % [{}, {}] within "
              "±0.5 s there\n({} % [{}, {}] on the 2-3 s utterances)", "spreads the same\nway"),
    Fact("learned s1 attention: the rate lane's retrain, the archived run", "which reproduces the\narchived "
         "`study/runs/learned_wrap_ctc_s1` exactly",
         lambda d: [] if _rate_retrained("learned_wrap_ctc_s1")["reproduced"] else ["learned_wrap_ctc_s1 not reproduced"]),
    Claim("Shaw s1 local share per rung and distance",
          "on the 2-3 s utterances\n{} % [{}, {}] of it lies within ±0.5 s, then {} % (5 s rung), {} % (10 s), {} % (20 s),\n"
          "{} % (40 s), {} % (80 s) and {} % [{}, {}] (160 s); its mean attended distance at 160 s is\n{} s of {} s.",
          lambda d: _shares_by_rung("shaw_ctc_s1")),
    Fact("Shaw s1: falls at every rung, from below RoPE s4's start", "its attention spreads with length as RoPE's does, "
         "from a lower start",
         lambda d: _falls("shaw_ctc_s1")
         + ([] if run_attention("shaw_ctc_s1", "ladder_test_alone")[2] < rope_s4_attention("ladder_test_alone")[1]
            else ["Shaw s1 starts no lower than RoPE s4"])),
    Claim("Shaw s1: the retrain differs from the archived run", "its\ndecodings differ from the archived "
          "`study/runs/shaw_ctc_s1` in {} of {} test hypotheses",
          lambda d: [(x := _more_pes_retrained("shaw", 1))["test"]["differing"], x["test"]["utterances"]]),
    Claim("Shaw's clip", "every offset beyond its clip ({} frames,\n{} s)",
          lambda d: [int((c := __import__("omegaconf").OmegaConf.load(ATTENTION_S4.parent.parent.parent.parent.parent
                                                                       / "conf" / "pe" / "shaw.yaml")).attention.max_distance),
                     c.attention.max_distance * 0.04]),
    Claim("ALiBi s0 local share and distance",
          "{} % [{}, {}] of its attention within ±0.5 s on the "
          "2-3 s utterances, {} % on the 20 s\nrung and still {} % [{}, {}] at 160 s, where its mean attended distance is "
          "{} s of {} s",
          lambda d: [*_pct(run_attention("alibi_ctc_s0", "ladder_test_alone"))[:3],
                     100 * run_attention("alibi_ctc_s0", "ladder_test_gap500ms_20")[0],
                     *_pct(run_attention("alibi_ctc_s0", "ladder_test_gap500ms_160"))[:3],
                     run_attention("alibi_ctc_s0", "ladder_test_gap500ms_160", "mean_distance_s")[0],
                     run_attention("alibi_ctc_s0", "ladder_test_gap500ms_160", "duration")[0]]),
    Fact("ALiBi s0 local at every length", "local at every length",
         lambda d: [f"ALiBi's local share on {s} reaches down to {run_attention('alibi_ctc_s0', s)[1]:.3f}"
                    for s in ATT_SETS
                    if run_attention("alibi_ctc_s0", s)[1] < 0.4]),
    Claim("ALiBi s0 agrees with the study table", "the study table's three seed-0 utterances said {} at 128-256 s too",
          lambda d: [local(d, "alibi", "128-256")]),
    Fact("ALiBi s0 is the archived run", "which reproduces the archived `study/runs/alibi_ctc_s0`\nexactly",
         lambda d: [] if _more_pes_retrained("alibi", 0)["reproduced"] else ["alibi_ctc_s0 not reproduced"]),
    Claim("T5 s1 local share per rung and distance",
          "{} % [{}, {}] of its\nattention lies within ±0.5 s on the 2-3 s utterances (`none` seed 4: {} %), "
          "then {} % (5 s\nrung), {} % (10 s), {} % (20 s), {} % (40 s), {} % (80 s) and {} % [{}, {}] (160 s), "
          "about\nhalf at each doubling; at 160 s its mean attended distance is {} s of {} s",
          lambda d: (lambda v: [*v[:3], 100 * run_attention("none_ctc_s4", "ladder_test_alone")[0], *v[3:]])(
              _shares_by_rung("t5_ctc_s1"))),
    Fact("T5 s1: about half at each doubling", "about\nhalf at each doubling",
         lambda d: [f"{a} -> {b}: {y / x:.2f}" for sets in [[f"ladder_test_gap500ms_{r}" for r in (5, 10, 20, 40, 80, 160)]]
                    for a, b, x, y in zip(sets, sets[1:], [run_attention("t5_ctc_s1", z)[0] for z in sets],
                                          [run_attention("t5_ctc_s1", z)[0] for z in sets[1:]])
                    if not 0.4 <= y / x <= 0.6]),
    Fact("T5 s1: more local than none at 2-4 s", "more local than `none` on short inputs",
         lambda d: [] if run_attention("t5_ctc_s1", "ladder_test_alone")[1] > run_attention("none_ctc_s4", "ladder_test_alone")[2]
         and run_attention("t5_ctc_s1", "ladder_test_alone")[1] > run_attention("none_ctc_s3", "ladder_test_alone")[2]
         else ["CIs overlap with none's"]),
    Fact("T5 s1: a third, as uniform", "a third of the\nrecording, as for uniform attention",
         lambda d: [] if abs(run_attention("t5_ctc_s1", "ladder_test_gap500ms_160", "mean_distance_s")[0]
                             / run_attention("t5_ctc_s1", "ladder_test_gap500ms_160", "duration")[0] - 1 / 3) < 0.02
         else ["not a third"]),
    Fact("T5 s1 attention: the lane's retrain, not the archived run", "which does **not** reproduce the\narchived "
         "`study/runs/t5_ctc_s1`",
         lambda d: ["t5_ctc_s1 reproduced"] if _more_pes_retrained("t5", 1)["reproduced"] else []),
    Claim("arm 3 relative s0 attention",
          "{} % [{}, {}] of its attention within ±0.5 s on the 2-3 s\n  utterances, falling slowly with length "
          "({} % on the 5 s rung, {} % at 20 s) to {} % [{},\n  {}] at 160 s, where its mean attended distance is {} s "
          "of {} s. The three-utterance table\n  said {} at 2-4 s and {} at 160 s",
          lambda d: [*_local_by_length(A3R),
                     local(d, "relative", "2-4", "arms/frontend70"), local(d, "relative", "128-256", "arms/frontend70")]),
    Fact("arm 3 relative s0: falls at every rung", "falling slowly with length",
         lambda d: _falls(A3R)),
    Claim("arm 3 relative s1 attention",
          "{} % [{}, {}] within ±0.5 s on the\n  2-3 s utterances, {} % on the 5 s rung, {} % at 20 s and {} % [{}, {}] "
          "at 160 s, where\n  its mean attended distance is {} s of {} s (seed 0: {} %, {} %, {} s)",
          lambda d: [*_local_by_length(A3R1), *(s0 := _local_by_length(A3R))[:1], s0[5], s0[8]]),
    Fact("arm 3 relative s1: below seed 0 at every rung, falling", "a little less so at every rung",
         lambda d: [f"{s}: not below seed 0" for s in ATT_SETS if not run_attention(A3R1, s)[2] < run_attention(A3R, s)[1]]
         + _falls(A3R1)),
    *_uniform(A3N1, "uniform on long inputs again, its mean attended distance at 160 s {} s of {} s,\n  a third of the "
              "recording, with {} % [{}, {}] of its attention within ±0.5 s ({} % [{},\n  {}] on the 2-3 s utterances",
              "uniform on long inputs again"),
    Claim("arm 3 none s1 against seed 0", "utterances; seed 0: {} %)",
          lambda d: [100 * run_attention(A3N, "ladder_test_alone")[0]]),
    Fact("arm 3 none s1: reproduced, seed 0 not", "which reproduces its archived run exactly (seed 0's retrain\n  did not)",
         lambda d: [] if _arm_retrained("frontend70", "none_ctc_s1")["reproduced"]
         and not _arm_retrained("frontend70", "none_ctc_s0")["reproduced"] else ["reproduction"]),
    *_uniform(A3S1, "near uniform\n  again at length: at 160 s its mean attended distance is {} s of {} s, a third of the\n  "
              "recording, and {} % [{}, {}] of its attention lies within ±0.5 s; on the 2-3 s utterances\n  {} % [{}, {}]",
              "near uniform\n  again at length"),
    Claim("arm 3 sinusoidal s1 against none and relative s1", "above `none` seed 1's {} % and far below relative seed 1's {} %",
          lambda d: [100 * run_attention(A3N1, "ladder_test_alone")[0], 100 * run_attention(A3R1, "ladder_test_alone")[0]]),
    Fact("arm 3 sinusoidal s1: above none, below relative, as seed 0", "above `none` seed 1's",
         lambda d: [] if run_attention(A3N1, "ladder_test_alone")[2] < run_attention(A3S1, "ladder_test_alone")[1]
         and run_attention(A3S1, "ladder_test_alone")[2] < run_attention(A3R1, "ladder_test_alone")[1]
         and run_attention(A3N, "ladder_test_alone")[2] < run_attention(A3S, "ladder_test_alone")[1] else ["CIs overlap"]),
    Fact("arm 3 sinusoidal s1: reproduced", "Sinusoidal, 70 ms front end, seed 1**, which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("frontend70", "sinusoidal_ctc_s1")["reproduced"] else ["not reproduced"]),
    Fact("arm 3 relative s1: reproduced", "Relative, 70 ms front end, seed 1**, which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("frontend70", "relative_ctc_s1")["reproduced"] else ["not reproduced"]),
    Fact("arm 3 relative s0: reproduced", "which reproduces its archived run exactly (every\n  test and long-form "
         "hypothesis)", lambda d: [] if _arm_retrained("frontend70", "relative_ctc_s0")["reproduced"] else ["not reproduced"]),
    *_uniform(A3N, "the study's\n  `none`: at 160 s its mean attended distance is {} s of {} s, a third of the recording, with\n  {} % [{}, {}] "
              "of its attention within ±0.5 s ({} % [{}, {}] on the 2-3 s utterances", "uniform on long inputs, as the "
              "study's\n  `none`"),
    _arm3_against("none", A3R, "against relative's {} %). The three-utterance table said {} and {}"),
    Claim("arm 3 none s0: another sample", "({} of the {} test\n  hypotheses differ from the archived run's",
          lambda d: [(r := _arm_retrained("frontend70", "none_ctc_s0"))["test"]["differing"], r["test"]["utterances"]]),
    Fact("arm 3 none s0: not reproduced", "seed 0**, another sample of the recipe (149",
         lambda d: ["reproduced"] if _arm_retrained("frontend70", "none_ctc_s0")["reproduced"] else []),
    *_uniform(A3S, "like `none`: at 160 s its mean attended distance is {} s of {} s, a third of the\n  recording, with {} % "
              "[{}, {}] of its attention within ±0.5 s ({} % [{}, {}] on the 2-3 s\n  utterances", "exactly: near uniform\n  on "
              "long inputs"),
    _arm3_against("sinusoidal", A3N, "a little above `none`'s {} % and far below relative's). The three-utterance "
                  "table\n  said {} and {}"),
    Fact("arm 3 sinusoidal s0: above none, below relative", "a little above `none`'s",
         lambda d: [] if run_attention(A3N, "ladder_test_alone")[2] < run_attention(A3S, "ladder_test_alone")[1]
         and run_attention(A3S, "ladder_test_alone")[2] < run_attention(A3R, "ladder_test_alone")[1] else ["CIs overlap"]),
    Fact("arm 3 sinusoidal s0: reproduced", "Sinusoidal, 70 ms front end, seed 0**, which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("frontend70", "sinusoidal_ctc_s0")["reproduced"] else ["not reproduced"]),
    *_uniform(A3C, "uniform on long\n  inputs as `none` is: its mean attended distance at 160 s is {} s of {} s, a third of the\n  "
              "recording, and {} % [{}, {}] of its attention lies within ±0.5 s ({} % [{}, {}] on the\n  2-3 s utterances",
              "uniform on long\n  inputs as `none` is"),
    _arm3_against("cape", A3N, "the CI overlaps `none`'s, {} %, and lies below sinusoidal's). CAPE's\n  augmentation "
                  "keeps the model from using absolute position, as RESULTS.md's arm 3 reads the CER.\n  The "
                  "three-utterance table said {} and {}"),
    Fact("arm 3 CAPE s0: like none, below sinusoidal", "the CI overlaps `none`'s",
         lambda d: [] if (c := run_attention(A3C, "ladder_test_alone"))[1] <= (n := run_attention(A3N, "ladder_test_alone"))[2]
         and n[1] <= c[2] and c[2] < run_attention(A3S, "ladder_test_alone")[1] else ["CIs"]),
    Fact("arm 3 CAPE s0: reproduced", "CAPE, 70 ms front end, seed 0**, which reproduces its archived run exactly too",
         lambda d: [] if _arm_retrained("frontend70", "cape_ctc_s0")["reproduced"] else ["not reproduced"]),
    *_uniform(A3C1, "uniform on long\n  inputs as seed 0 is: at 160 s its mean attended distance is {} s of {} s, a third of the\n  "
              "recording, with {} % [{}, {}] of its attention within ±0.5 s; on the 2-3 s utterances\n  {} % [{}, {}]",
              "uniform on long\n  inputs as seed 0 is"),
    Claim("arm 3 CAPE s1 against none and sinusoidal s1", "overlapping `none` seed 1's {} % and below sinusoidal seed 1's {} %",
          lambda d: [100 * run_attention(A3N1, "ladder_test_alone")[0], 100 * run_attention(A3S1, "ladder_test_alone")[0]]),
    Fact("arm 3 CAPE s1: like none, below sinusoidal, as seed 0", "overlapping `none` seed 1's",
         lambda d: [] if (c := run_attention(A3C1, "ladder_test_alone"))[1] <= (n := run_attention(A3N1, "ladder_test_alone"))[2]
         and n[1] <= c[2] and c[2] < run_attention(A3S1, "ladder_test_alone")[1] else ["CIs"]),
    Fact("arm 3 CAPE s1: reproduced", "CAPE, 70 ms front end, seed 1**, which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("frontend70", "cape_ctc_s1")["reproduced"] else ["not reproduced"]),
    *_uniform("arms/conformer/none_ctc_s0", "uniform on long\n  inputs, as the Transformer's `none` is: at 160 s its "
              "mean attended distance is {} s of {} s,\n  a third of the recording, with {} % [{}, {}] of its attention "
              "within ±0.5 s; on the 2-3 s\n  utterances {} % [{}, {}]", "uniform on long\n  inputs, as the Transformer's"),
    Claim("Conformer none s0: against the Transformer's, and the three-utterance table",
          "(the Transformer's `none`, seed 4: {} %). Its convolution\n  modules, not its attention, keep the order "
          "(RESULTS.md's Conformer arm). The three-utterance\n  table said {} and {}",
          lambda d: [100 * run_attention("none_ctc_s4", "ladder_test_alone")[0], local(d, "none", "2-4", "arms/conformer"),
                     local(d, "none", "128-256", "arms/conformer")]),
    *_uniform("arms/conformer/sinusoidal_ctc_s0", "near uniform on long\n  inputs, like the Conformer's `none`: at 160 s "
              "its mean attended distance is {} s of {} s, a\n  third of the recording, with {} % [{}, {}] of its attention "
              "within ±0.5 s; on the 2-3 s\n  utterances {} % [{}, {}]", "near uniform on long\n  inputs, like the Conformer's"),
    Claim("Conformer sinusoidal s0: against none, and the three-utterance table",
          "overlapping `none`'s {} % (in arm 3's Transformer sinusoidal\n  was the more local of the two). The "
          "three-utterance table said {} and {}",
          lambda d: [100 * run_attention("arms/conformer/none_ctc_s0", "ladder_test_alone")[0],
                     local(d, "sinusoidal", "2-4", "arms/conformer"), local(d, "sinusoidal", "128-256", "arms/conformer")]),
    Fact("Conformer sinusoidal s0: overlaps none", "overlapping `none`'s",
         lambda d: [] if (s := run_attention("arms/conformer/sinusoidal_ctc_s0", "ladder_test_alone"))[1]
         <= (n := run_attention("arms/conformer/none_ctc_s0", "ladder_test_alone"))[2] and n[1] <= s[2] else ["CIs apart"]),
    Fact("Conformer sinusoidal s0: reproduced", "Sinusoidal, Conformer, seed 0**, which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "sinusoidal_ctc_s0")["reproduced"] else ["not reproduced"]),
    Claim("Conformer RoPE s0: shares, distance, the Transformer's, the three-utterance table",
          "{} % [{}, {}]\n  of it within ±0.5 s on the 2-3 s utterances (the Transformer's RoPE, seed 4: {} %), falling at\n"
          "  every rung to {} % [{}, {}] at 160 s, where its mean attended distance is {} s of {} s.\n  The "
          "three-utterance table said {} and {}",
          lambda d: [*_pct(run_attention("arms/conformer/rope_ctc_s0", "ladder_test_alone"))[:3],
                     100 * rope_s4_attention("ladder_test_alone")[0],
                     *_pct(run_attention("arms/conformer/rope_ctc_s0", "ladder_test_gap500ms_160"))[:3],
                     run_attention("arms/conformer/rope_ctc_s0", "ladder_test_gap500ms_160", "mean_distance_s")[0],
                     run_attention("arms/conformer/rope_ctc_s0", "ladder_test_gap500ms_160", "duration")[0],
                     local(d, "rope", "2-4", "arms/conformer"), local(d, "rope", "128-256", "arms/conformer")]),
    Fact("Conformer RoPE s0: falls at every rung, from below the Transformer's", "its attention\n  spreads with length "
         "as the Transformer's RoPE's does, from a less local start",
         lambda d: _falls("arms/conformer/rope_ctc_s0")
         + ([] if run_attention("arms/conformer/rope_ctc_s0", "ladder_test_alone")[2] < rope_s4_attention("ladder_test_alone")[1]
            else ["not less local than the Transformer's"])),
    Fact("Conformer RoPE s0: reproduced", "RoPE, Conformer, seed 0** (2026-12-02), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "rope_ctc_s0")["reproduced"] else ["not reproduced"]),
    *_uniform("arms/conformer/none_ctc_s1", "like seed 0's: at 160 s its mean attended distance is {} s of {} s, a third\n  "
              "of the recording, with {} % [{}, {}] of its attention within ±0.5 s; on the 2-3 s utterances\n  {} % [{}, {}]",
              "its attention is uniform\n  on long inputs like seed 0's"),
    Claim("Conformer none s1: another sample", "({} of its {} test\n  hypotheses differ from the archived run, {} char "
          "errors against {})",
          lambda d: [(r := _arm_retrained("conformer", "none_ctc_s1"))["test"]["differing"], r["test"]["utterances"],
                     *r["test"]["char_errors"]]),
    Fact("Conformer none s1: not reproduced", "seed 1** (2026-12-02), another sample of its recipe",
         lambda d: ["reproduced"] if _arm_retrained("conformer", "none_ctc_s1")["reproduced"] else []),
    Claim("Conformer none s1: against seed 0", "overlapping seed 0's {} %",
          lambda d: [100 * run_attention("arms/conformer/none_ctc_s0", "ladder_test_alone")[0]]),
    Fact("Conformer none s1: overlaps seed 0", "overlapping seed 0's",
         lambda d: [] if (a := run_attention("arms/conformer/none_ctc_s1", "ladder_test_alone"))[1]
         <= (z := run_attention("arms/conformer/none_ctc_s0", "ladder_test_alone"))[2] and z[1] <= a[2] else ["CIs apart"]),
    *_uniform("arms/conformer/sinusoidal_ctc_s1", "as at seed 0: at 160 s its mean attended distance is\n  {} s of {} s, a "
              "third of the recording, with {} % [{}, {}] of its attention within\n  ±0.5 s; on the 2-3 s utterances {} % [{}, {}]",
              "its\n  attention is near uniform on long inputs, as at seed 0"),
    Claim("Conformer sinusoidal s1: against none s1, and seed 0", "overlapping the {} % of `none` at seed 1\n  (at seed 0, {} % against {} %)",
          lambda d: [100 * run_attention("arms/conformer/none_ctc_s1", "ladder_test_alone")[0],
                     100 * run_attention("arms/conformer/sinusoidal_ctc_s0", "ladder_test_alone")[0],
                     100 * run_attention("arms/conformer/none_ctc_s0", "ladder_test_alone")[0]]),
    Fact("Conformer sinusoidal s1: overlaps none s1", "% of `none` at seed 1",
         lambda d: [] if (s := run_attention("arms/conformer/sinusoidal_ctc_s1", "ladder_test_alone"))[1]
         <= (n := run_attention("arms/conformer/none_ctc_s1", "ladder_test_alone"))[2] and n[1] <= s[2] else ["CIs apart"]),
    Fact("Conformer sinusoidal s1: reproduced", "Sinusoidal, Conformer, seed 1** (2026-12-02), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "sinusoidal_ctc_s1")["reproduced"] else ["not reproduced"]),
    Claim("Conformer relative s0: shares, distance, against the Transformer's and RoPE, the three-utterance table",
          "from {} % [{}, {}] within\n  ±0.5 s on the 2-3 s utterances (the Transformer's relative, seed 4: {} %), falling at every\n  "
          "rung ({} % on the 5 s rung, {} % at 20 s) to {} % [{}, {}] at 160 s, where its mean\n  attended distance is {} s "
          "of {} s (the Conformer's RoPE: {} % and {} s). The\n  three-utterance table said {} and {}",
          lambda d: [*(r := _local_by_length("arms/conformer/relative_ctc_s0"))[:3],
               100 * s4_attention("relative", "ladder_test_alone")[0], *r[3:],
               100 * run_attention("arms/conformer/rope_ctc_s0", "ladder_test_gap500ms_160")[0],
               run_attention("arms/conformer/rope_ctc_s0", "ladder_test_gap500ms_160", "mean_distance_s")[0],
               local(d, "relative", "2-4", "arms/conformer"), local(d, "relative", "128-256", "arms/conformer")]),
    Fact("Conformer relative s0: the most local of seed 0 at every rung, falling", "the\n  Conformer's most local "
         "attention at every length of seed 0",
         lambda d: _falls("arms/conformer/relative_ctc_s0")
         + [f"{s}: {o} not below relative" for s in ATT_SETS for o in ("none", "sinusoidal", "rope")
            if not run_attention(f"arms/conformer/{o}_ctc_s0", s)[2] < run_attention("arms/conformer/relative_ctc_s0", s)[1]]),
    Fact("Conformer relative s0: reproduced", "Relative, Conformer, seed 0** (2026-12-02), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "relative_ctc_s0")["reproduced"] else ["not reproduced"]),
    Claim("Conformer RoPE s1: shares, against seed 0", "from {} % [{}, {}] within ±0.5 s on the 2-3 s\n  utterances "
          "to {} % [{}, {}] at 160 s, falling at every rung (seed 0: {} % and {} %)",
          lambda d: [*_pct(run_attention("arms/conformer/rope_ctc_s1", "ladder_test_alone"))[:3],
                     *_pct(run_attention("arms/conformer/rope_ctc_s1", "ladder_test_gap500ms_160"))[:3],
                     100 * run_attention("arms/conformer/rope_ctc_s0", "ladder_test_alone")[0],
                     100 * run_attention("arms/conformer/rope_ctc_s0", "ladder_test_gap500ms_160")[0]]),
    Fact("Conformer RoPE s1: falls at every rung", "falling at every rung (seed 0:",
         lambda d: _falls("arms/conformer/rope_ctc_s1")),
    Fact("Conformer RoPE s1: reproduced", "RoPE, Conformer, seed 1** (2026-12-02), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "rope_ctc_s1")["reproduced"] else ["not reproduced"]),
    *_uniform("arms/conformer/cape_ctc_s0", "as the Conformer's `none` and sinusoidal are: at 160 s its mean\n  attended "
              "distance is {} s of {} s, a third of the recording, with {} % [{}, {}] of its\n  attention within ±0.5 s; "
              "on the 2-3 s utterances {} % [{}, {}]", "its attention\n  is near uniform at length, as the "
              "Conformer's `none` and sinusoidal are"),
    Claim("Conformer CAPE s0: against none, sinusoidal, the Transformer's, the three-utterance table",
          "its CI overlapping those of\n  `none` ({} %) and sinusoidal ({} %; the Transformer's CAPE, seed 4: {} %). The three-utterance\n"
          "  table said {} and {}",
          lambda d: [100 * run_attention("arms/conformer/none_ctc_s0", "ladder_test_alone")[0],
                     100 * run_attention("arms/conformer/sinusoidal_ctc_s0", "ladder_test_alone")[0],
                     100 * s4_attention("cape", "ladder_test_alone")[0],
                     local(d, "cape", "2-4", "arms/conformer"), local(d, "cape", "128-256", "arms/conformer")]),
    Fact("Conformer CAPE s0: overlaps none and sinusoidal", "its CI overlapping those of\n  `none`",
         lambda d: _apart_on_short("arms/conformer/cape_ctc_s0", ["arms/conformer/none_ctc_s0", "arms/conformer/sinusoidal_ctc_s0"])),
    Fact("Conformer CAPE s0: reproduced", "CAPE, Conformer, seed 0** (2026-12-02), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "cape_ctc_s0")["reproduced"] else ["not reproduced"]),
    Fact("Conformer seed 0: complete, the story", "Seed 0 of the Conformer is complete: relative the most local on every\n"
         "  set, RoPE spreading with length, `none`, sinusoidal and CAPE near uniform at 160 s",
         lambda d: _conformer_story(0)),
    Claim("Conformer relative s1: shares, distance, against seed 0",
          "from {} % [{}, {}] within ±0.5 s on the 2-3 s utterances, falling at every rung ({} % on\n  the 5 s rung, "
          "{} % at 20 s) to {} % [{}, {}] at 160 s, where its mean attended distance\n  is {} s of {} s (seed 0: {} %, {} %, {} s)",
          lambda d: [*_local_by_length("arms/conformer/relative_ctc_s1"),
                     *(s0 := _local_by_length("arms/conformer/relative_ctc_s0"))[:1], s0[5], s0[8]]),
    Fact("Conformer relative s1: the most local of seed 1, above seed 0, falling", "again the\n  Conformer's most local "
         "attention on every set of its seed, and more local than seed 0 on each",
         lambda d: _falls("arms/conformer/relative_ctc_s1")
         + [f"{s}: {o} not below relative" for s in ATT_SETS for o in ("none", "sinusoidal", "rope")
            if not run_attention(f"arms/conformer/{o}_ctc_s1", s)[2] < run_attention("arms/conformer/relative_ctc_s1", s)[1]]
         + [f"{s}: not above seed 0" for s in ATT_SETS
            if not run_attention("arms/conformer/relative_ctc_s0", s)[2] < run_attention("arms/conformer/relative_ctc_s1", s)[1]]),
    Fact("Conformer relative s1: reproduced", "Relative, Conformer, seed 1** (2026-12-02), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "relative_ctc_s1")["reproduced"] else ["not reproduced"]),
    *_uniform("arms/conformer/cape_ctc_s1", "near uniform\n  at length, as seed 0 is: at 160 s its mean attended distance "
              "is {} s of {} s, a third of the\n  recording, with {} % [{}, {}] of its attention within ±0.5 s; on the 2-3 s "
              "utterances {} %\n  [{}, {}]", "CAPE, Conformer, seed 1** (2026-12-03), which reproduces its archived run "
              "exactly: near uniform"),
    Claim("Conformer CAPE s1: against none and sinusoidal s1, and seed 0",
          "its CI overlapping those of seed 1's `none` ({} %) and sinusoidal ({} %), as at\n  seed 0 ({} %)",
          lambda d: [100 * run_attention(f"arms/conformer/{o}_ctc_s1", "ladder_test_alone")[0] for o in ("none", "sinusoidal")]
          + [100 * run_attention("arms/conformer/cape_ctc_s0", "ladder_test_alone")[0]]),
    Fact("Conformer CAPE s1: overlaps none and sinusoidal s1", "its CI overlapping those of seed 1's",
         lambda d: _apart_on_short("arms/conformer/cape_ctc_s1", ["arms/conformer/none_ctc_s1", "arms/conformer/sinusoidal_ctc_s1"])),
    Fact("Conformer CAPE s1: reproduced", "CAPE, Conformer, seed 1** (2026-12-03), which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "cape_ctc_s1")["reproduced"] else ["not reproduced"]),
    Fact("Conformer: complete, both seeds the same story", "its two seeds agree for every PE (relative the "
         "most local on\nevery set, RoPE spreading with length, `none`, sinusoidal and CAPE near uniform at 160 s)",
         lambda d: _conformer_story(0) + _conformer_story(1)),
    *_uniform(f"{F70L}/none_ctc_s0", "uniform on long inputs, as at 1100 steps: at 160 s its mean attended distance is "
              "{} s\n  of {} s, a third of the recording, with {} % [{}, {}] of its attention within ±0.5 s; on\n  the 2-3 s "
              "utterances {} % [{}, {}]", "`none`, 70 ms front end, 3300 steps, seed 0** (2026-12-03), which reproduces "
              "its archived run\n  exactly: uniform on long inputs"),
    Claim("arm 3 at 3x the steps, none s0: against 1100 steps, the three-utterance table",
          "its CI above that of the 1100-step `none` of seed 0\n  ({} % [{}, {}])", lambda d: _pct(run_attention(A3N, "ladder_test_alone"))[:3]),
    Fact("arm 3 at 3x the steps, none s0: above 1100 steps on short inputs only", "the longer training made it "
         "somewhat more local on short inputs, not on\n  long ones",
         lambda d: ([] if run_attention(A3N, "ladder_test_alone")[2] < run_attention(f"{F70L}/none_ctc_s0", "ladder_test_alone")[1]
                    else ["CIs overlap at 2-3 s"])
         + [f"{s}: 3300 steps more than 0.01 above" for s in ("ladder_test_gap500ms_160",)
            if run_attention(f"{F70L}/none_ctc_s0", s)[0] - run_attention(A3N, s)[0] > 0.01]),
    Claim("arm 3 at 3x the steps, none s0: the three-utterance table", "long ones. The three-utterance table said {} and {}.\n",
          lambda d: [local(d, "none", "2-4", F70L), local(d, "none", "128-256", F70L)]),
    Fact("arm 3 at 3x the steps, none s0: reproduced", "`none`, 70 ms front end, 3300 steps, seed 0** (2026-12-03), which "
         "reproduces its archived run\n  exactly",
         lambda d: [] if _arm_retrained("frontend70_long", "none_ctc_s0")["reproduced"] else ["not reproduced"]),
    *_uniform(F70L_S, _at_160_then_short("near uniform as at 1100 steps"), "near uniform as at 1100 steps"),
    Claim("arm 3 at 3x the steps, sinusoidal s0: against 1100 steps and none, by rung, the three-utterance table",
          "far above the 1100-step sinusoidal's {} % and the 3300-step `none`'s {} %, falling at every rung between "
          "({} % on the 5 s rung, {} % at 20 s). The longer training taught it to use position at the training lengths, "
          "and that use does not reach long inputs. The three-utterance table said {} and {}",
          lambda d: [100 * run_attention(A3S, "ladder_test_alone")[0], 100 * run_attention(F70L_N, "ladder_test_alone")[0],
                     *_local_by_length(F70L_S)[3:5], local(d, "sinusoidal", "2-4", F70L), local(d, "sinusoidal", "128-256", F70L)]),
    Fact("arm 3 at 3x the steps, sinusoidal s0: above 1100 steps and none on short inputs, falling, not on long ones",
         "taught it to use position at the training lengths, and that use does not reach long inputs",
         lambda d: _falls(F70L_S) + [f"CI not above {o}'s at 2-3 s" for o in (A3S, F70L_N)
                                     if not run_attention(o, "ladder_test_alone")[2] < run_attention(F70L_S, "ladder_test_alone")[1]]
         + ([] if run_attention(F70L_S, "ladder_test_gap500ms_160")[0] < 0.02 else ["not near uniform at 160 s"])),
    Fact("arm 3 at 3x the steps, sinusoidal s0: reproduced", "**Sinusoidal, 70 ms front end, 3300 steps, seed 0** (2026-12-03), "
         "which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("frontend70_long", "sinusoidal_ctc_s0")["reproduced"] else ["not reproduced"]),
    *_another_sample("frontend70_long", "cape_ctc_s0", "**CAPE, 70 ms front end, 3300 steps, seed 0** (2026-12-03)"),
    *_uniform(F70L_C, _at_160_then_short("uniform as `none`'s is"), "uniform as `none`'s is"),
    Claim("arm 3 at 3x the steps, CAPE s0: against none and sinusoidal, the three-utterance table",
          "its CI overlapping that of `none` ({} %) and far below sinusoidal's ({} %), as at 1100 steps. The "
          "three-utterance table said {} and {}",
          lambda d: [100 * run_attention(F70L_N, "ladder_test_alone")[0], 100 * run_attention(F70L_S, "ladder_test_alone")[0],
                     local(d, "cape", "2-4", F70L), local(d, "cape", "128-256", F70L)]),
    Fact("arm 3 at 3x the steps, CAPE s0: like none, below sinusoidal, as at 1100 steps",
         "its CI overlapping that of `none` (51.1 %) and far below sinusoidal's (71.2 %), as at 1100 steps",
         lambda d: _apart_on_short(F70L_C, [F70L_N]) + _apart_on_short(A3C, [A3N])
         + [f"{c}: not below {si}" for c, si in ((F70L_C, F70L_S), (A3C, A3S))
            if not run_attention(c, "ladder_test_alone")[2] < run_attention(si, "ladder_test_alone")[1]]),
    *_another_sample("frontend70_long", "none_ctc_s1", "**`none`, 70 ms front end, 3300 steps, seed 1** (2026-12-03)"),
    *_uniform(f"{F70L}/none_ctc_s1", _at_160_then_short("uniform like seed 0's"), "uniform like seed 0's"),
    Claim("arm 3 at 3x the steps, none s1: against seed 0", "its CI overlapping that of seed 0 ({} %)",
          lambda d: [100 * run_attention(F70L_N, "ladder_test_alone")[0]]),
    Fact("arm 3 at 3x the steps, none s1: overlaps seed 0", "its CI overlapping that of seed 0 (51.1 %)",
         lambda d: _apart_on_short(f"{F70L}/none_ctc_s1", [F70L_N])),
    *_another_sample("frontend70_long", "sinusoidal_ctc_s1", "**Sinusoidal, 70 ms front end, 3300 steps, seed 1** (2026-12-03)"),
    *_uniform(f"{F70L}/sinusoidal_ctc_s1", _at_160_then_short("near uniform as at seed 0"), "near uniform as at seed 0"),
    Claim("arm 3 at 3x the steps, sinusoidal s1: against none s1", "far above `none`'s {} % at seed 1, falling at every rung between",
          lambda d: [100 * run_attention(f"{F70L}/none_ctc_s1", "ladder_test_alone")[0]]),
    Fact("arm 3 at 3x the steps, sinusoidal s1: above none s1, falling", "far above `none`'s 52.0 % at seed 1",
         lambda d: _falls(f"{F70L}/sinusoidal_ctc_s1")
         + ([] if run_attention(f"{F70L}/none_ctc_s1", "ladder_test_alone")[2]
            < run_attention(f"{F70L}/sinusoidal_ctc_s1", "ladder_test_alone")[1] else ["CI not above none s1's"])),
    *_another_sample("frontend70_long", "cape_ctc_s1", "**CAPE, 70 ms front end, 3300 steps, seed 1** (2026-12-03)"),
    *_uniform(f"{F70L}/cape_ctc_s1", _at_160_then_short("uniform again as at seed 0"), "uniform again as at seed 0"),
    *_cape_between(1, "its CI overlapping that of `none` at seed 1 ({} %) and far below sinusoidal's at seed 1 ({} %)",
                   "CI overlapping that of `none` at seed 1"),
    *_another_sample("frontend70_long", "none_ctc_s2", "**`none`, 70 ms front end, 3300 steps, seed 2** (2026-12-03)"),
    *_uniform(f"{F70L}/none_ctc_s2", _at_160_then_short("uniform as at seeds 0 and 1"), "uniform as at seeds 0 and 1"),
    Claim("arm 3 at 3x the steps, none s2: against seeds 0 and 1", "its CI overlapping those of seeds 0 and 1 ({} %, {} %)",
          lambda d: [100 * run_attention(f"{F70L}/none_ctc_s{s}", "ladder_test_alone")[0] for s in (0, 1)]),
    Fact("arm 3 at 3x the steps, none s2: overlaps seeds 0 and 1", "its CI overlapping those of seeds 0 and 1",
         lambda d: _apart_on_short(f"{F70L}/none_ctc_s2", [f"{F70L}/none_ctc_s0", f"{F70L}/none_ctc_s1"])),
    *_another_sample("frontend70_long", "sinusoidal_ctc_s2", "**Sinusoidal, 70 ms front end, 3300 steps, seed 2** (2026-12-04)"),
    *_uniform(f"{F70L}/sinusoidal_ctc_s2", _at_160_then_short("near uniform again, as at seeds 0 and 1"),
              "near uniform again, as at seeds 0 and 1"),
    Claim("arm 3 at 3x the steps, sinusoidal s2: against none s2 and sinusoidal s1, s0",
          "far above `none`'s {} % at seed 2, falling at every rung between; its CI overlaps seed\n1's ({} %) and lies above "
          "seed 0's ({} %)",
          lambda d: [100 * run_attention(f"{F70L}/{r}", "ladder_test_alone")[0]
                     for r in ("none_ctc_s2", "sinusoidal_ctc_s1", "sinusoidal_ctc_s0")]),
    Fact("arm 3 at 3x the steps, sinusoidal s2: above none s2, falling, like s1, above s0",
         "falling at every rung between; its CI overlaps seed",
         lambda d: _falls(f"{F70L}/sinusoidal_ctc_s2") + _apart_on_short(f"{F70L}/sinusoidal_ctc_s2", [f"{F70L}/sinusoidal_ctc_s1"])
         + [f"CI not above {o}'s" for o in ("none_ctc_s2", "sinusoidal_ctc_s0")
            if not run_attention(f"{F70L}/{o}", "ladder_test_alone")[2]
            < run_attention(f"{F70L}/sinusoidal_ctc_s2", "ladder_test_alone")[1]]),
    *_another_sample("frontend70_long", "cape_ctc_s2", "**CAPE, 70 ms front end, 3300 steps, seed 2** (2026-12-04)"),
    *_uniform(f"{F70L}/cape_ctc_s2", _at_160_then_short("uniform at every seed"), "uniform at every seed"),
    *_cape_between(2, "its CI\n  overlapping that of `none` at seed 2 ({} %) and far below sinusoidal's at seed 2 ({} %)",
                   "overlapping that of `none` at seed 2"),
    Fact("arm 3 at 3x the steps: all three seeds complete, one story", "sinusoidal far the\nmost local at 2-3 s, all three "
         "near uniform at 160 s",
         lambda d: [f"{o}: not below sinusoidal at 2-3 s" for s in FOLDER_SEEDS[F70L]
                    for o in (f"{F70L}/none_ctc_s{s}", f"{F70L}/cape_ctc_s{s}")
                    if not run_attention(o, "ladder_test_alone")[2] < run_attention(f"{F70L}/sinusoidal_ctc_s{s}", "ladder_test_alone")[1]]
         + [f"{F70L}/{pe}_ctc_s{s}: not near uniform at 160 s" for s in FOLDER_SEEDS[F70L] for pe in ("none", "sinusoidal", "cape")
            if run_attention(f"{F70L}/{pe}_ctc_s{s}", "ladder_test_gap500ms_160")[0] > 0.02]),
    Fact("Conformer none s0: reproduced", "`none`, Conformer (arm 1), seed 0**, which reproduces its archived run exactly",
         lambda d: [] if _arm_retrained("conformer", "none_ctc_s0")["reproduced"] else ["not reproduced"]),
    Fact("arm 3: both seeds agree", "both seeds of each PE tell the same story",
         lambda d: _falls(A3R) + _falls(A3R1)
         + [f"{r}: not near uniform at 160 s" for r in (A3N, A3S, A3C, A3N1, A3S1, A3C1)
            if run_attention(r, "ladder_test_gap500ms_160")[0] > 0.02]
         + [f"seed {s}: sinusoidal not above none and CAPE" for s, (n, si, c) in ((0, (A3N, A3S, A3C)), (1, (A3N1, A3S1, A3C1)))
            if not run_attention(si, "ladder_test_alone")[1] > max(run_attention(n, "ladder_test_alone")[2],
                                                                     run_attention(c, "ladder_test_alone")[2])]),
    Claim("RoPE s4 recordings per rung", "every recording where a rung has fewer (80 s: {}, 160 s: {})",
          lambda d: [rope_s4_attention("ladder_test_gap500ms_80")[3], rope_s4_attention("ladder_test_gap500ms_160")[3]]),
]

TRANSDUCER = STUDY / "transducer"


def _transducer_vs_ctc(d, pe: str, seed: int) -> list[float]:
    """A transducer run's CER of the test pool decoded alone and its 160 s in-context ratio (CI),
    the CTC run's of the same PE and seed (study/ladder/), and their paired difference."""
    t, c = str(TRANSDUCER / f"{pe}_transducer_s{seed}"), str(LADDER / f"{pe}_ctc_s{seed}")
    tt, cc = d.ladder((t,), "gap500ms", 160), d.ladder((c,), "gap500ms", 160)
    return [tt.alone, cc.alone, tt.ratio, tt.ci_low, tt.ci_high, cc.ratio, cc.ci_low, cc.ci_high,
            *d.ladder_difference((t,), (c,), "gap500ms", 160)]


def _transducer_pooled(d, pe: str, suffix: str = "") -> list[float]:
    """`_transducer_vs_ctc` pooled over seeds 2 and 3 (crossed CIs: one draw of recordings for both
    seeds, and a draw of seeds), then ``pe`` minus `none` in context, paired, with each head."""
    t = tuple(str(TRANSDUCER / f"{pe}_transducer_s{s}") for s in (2, 3))
    c = tuple(str(LADDER / f"{pe}_ctc_s{s}") for s in (2, 3))
    tt, cc = d.ladder(t, "gap500ms", 160, suffix), d.ladder(c, "gap500ms", 160, suffix)
    out = [tt.alone, cc.alone, tt.ratio, tt.ci_low, tt.ci_high, cc.ratio, cc.ci_low, cc.ci_high,
           *d.ladder_difference(t, c, "gap500ms", 160, suffix, suffix)]
    if pe != "none":
        for loss, runs, folder in (("transducer", t, TRANSDUCER), ("ctc", c, LADDER)):
            out += d.ladder_difference(runs, tuple(str(folder / f"none_{loss}_s{s}") for s in (2, 3)), "gap500ms", 160)
    return out


def _transducer_choice(run: str) -> dict:
    import json
    return json.loads((TRANSDUCER / "reports" / f"{run}.choice.json").read_text())


def _transducer_pair(d, pe: str, other: str, loss: str, seed: int = 2) -> list[float]:
    """``pe`` minus ``other`` in context at 160 s, one seed, with the transducer or CTC head, paired."""
    folder = TRANSDUCER if loss == "transducer" else LADDER
    return list(d.ladder_difference((str(folder / f"{pe}_{loss}_s{seed}"),), (str(folder / f"{other}_{loss}_s{seed}"),),
                                    "gap500ms", 160))


def _transducer_rises(ratios: list[float]) -> list[str]:
    return [] if all(b > a for a, b in zip(ratios, ratios[1:])) else [f"ratios {ratios}"]


def _transducer_rope_window(d) -> list[float]:
    """RoPE's transducer (seed 2) with window:2.5 at 160 s: CER whole, in-context ratio and CI."""
    c = d.ladder((str(TRANSDUCER / "rope_transducer_s2"),), "gap500ms", 160, "_window2p5")
    return [c.whole, c.ratio, c.ci_low, c.ci_high]


def _transducer_window(run: str) -> list[float]:
    c = _transducer_choice(run)
    return [c["dev_rates"]["window:2.5"], c["dev_rates"]["plain"]]


def _transducer_runs_archived(d) -> list[str]:
    """The runs the transducer documents count: these ten, and no other."""
    from asr_pe.results_table import runs_in
    r = sorted(runs_in(TRANSDUCER))
    return [] if r == ["cape_transducer_s2", "cape_transducer_s3", "none_transducer_s2", "none_transducer_s3",
                       "relative_transducer_s2", "relative_transducer_s3", "rope_transducer_s2", "rope_transducer_s3",
                       "sinusoidal_transducer_s2", "sinusoidal_transducer_s3"] \
        else [f"archived: {r}"]


def _transducer_rope_apart(d) -> list[str]:
    """With either head, RoPE's pooled ratio at 160 s (its CI's low end) above every other PE's CI's
    high end (seeds 2-3 pooled)."""
    out = []
    for loss, folder in (("transducer", TRANSDUCER), ("ctc", LADDER)):
        def ci(pe):
            return d.ladder(tuple(str(folder / f"{pe}_{loss}_s{s}") for s in (2, 3)), "gap500ms", 160)
        low = ci("rope").ci_low
        out += [f"{loss}: {pe} up to {ci(pe).ci_high:.2f}, RoPE from {low:.2f}"
                for pe in ("none", "sinusoidal", "relative", "cape") if not ci(pe).ci_high < low]
    return out


TRANSDUCER_NOTE_CLAIMS = [
    Claim("opening: sinusoidal minus none, transducer and CTC (seeds 2-3)", "sinusoidal minus `none` in context: {} [{}, {}]\n"
          "with the transducer, {} [{}, {}] with CTC", lambda d: _transducer_pooled(d, "sinusoidal")[11:17]),
    Fact("opening: sinusoidal still degrades more than none, less than with CTC (seeds 2-3)", "With the transducer head "
         "sinusoidal still degrades more than `none`, but less than with\nCTC",
         lambda d: ([] if (v := _transducer_pooled(d, "sinusoidal"))[12] > 0 else ["not above none"])
         + ([] if v[10] < 0 else ["not below CTC"])),
    Claim("opening: RoPE still needs the window (seeds 2-3)", "in-context ratio at 160 s is {}× [{}, {}] against CTC's {}× "
          "[{}, {}], and the ±2.5 s\nwindow, chosen on dev at both seeds, takes it to {}× [{}, {}]",
          lambda d: [*_transducer_pooled(d, "rope")[2:8], *_transducer_pooled(d, "rope", "_window2p5")[2:5]]
          + ([] if all(_transducer_choice(f"rope_transducer_s{s}")["chosen"] == "window:2.5" for s in (2, 3))
             else [float("nan")])),
    Fact("opening: RoPE far above every other PE with either head", "with either head RoPE's ratio is far above every other\n"
         "PE's", _transducer_rope_apart),
    Fact("opening: RoPE degrades more than with CTC (seeds 2-3)", "a transducer with RoPE still needs the window**, more than CTC does",
         lambda d: [] if _transducer_pooled(d, "rope")[9] > 0 else ["paired CI not above 0"]),
    Claim("more accurate", "`none` 3.15 % CER on the ladder's 2-3 s test utterances\n  decoded alone, against {} % for "
          "CTC; sinusoidal {} % against {} %".replace("3.15", "{}"),
          lambda d: [*_transducer_vs_ctc(d, "none", 2)[:2], *_transducer_vs_ctc(d, "sinusoidal", 2)[:2]]),
    Claim("none s2: in context", "{}× [{}, {}] against {}× [{}, {}]; paired\n  over the recordings, transducer minus CTC "
          "{} [{}, {}]", lambda d: _transducer_vs_ctc(d, "none", 2)[2:]),
    Fact("none s2: degrades as CTC does", "`none` degrades with length as with CTC",
         lambda d: [] if (x := _transducer_vs_ctc(d, "none", 2))[9] <= 0 <= x[10] else [f"paired difference {x[8:]}"]),
    Claim("sinusoidal s2: in context", "less than with CTC**: {}× [{}, {}] at 160 s against {}× [{}, {}], paired {} [{}, {}]",
          lambda d: _transducer_vs_ctc(d, "sinusoidal", 2)[2:]),
    Claim("sinusoidal s2: the doublings", "(1.10×\n  at 5 s to 1.25× at 160 s)".replace("1.10", "{}").replace("1.25", "{}"),
          lambda d: [d.ladder((str(TRANSDUCER / "sinusoidal_transducer_s2"),), "gap500ms", r).ratio for r in (5, 160)]),
    Fact("sinusoidal s2: grows at every doubling", "its ratio still grows at every doubling of the ladder",
         lambda d: _transducer_rises([d.ladder((str(TRANSDUCER / "sinusoidal_transducer_s2"),), "gap500ms", x).ratio
                                             for x in (5, 10, 20, 40, 80, 160)])),
    Fact("the archive holds ten transducer runs", "all 10 runs archived", _transducer_runs_archived),
    Claim("opening: relative against CTC (seeds 2-3)", "**Relative degrades about as with CTC**: {}×\n[{}, {}] against {}× "
          "[{}, {}], paired {} [{}, {}]", lambda d: _transducer_pooled(d, "relative")[2:11]),
    Fact("opening: relative's pooled CI includes 0, seed 2's above", "(seed 2 alone was above CTC)",
         lambda d: ([] if (v := _transducer_pooled(d, "relative"))[9] <= 0 <= v[10] else [f"pooled {v[8:11]}"])
         + ([] if _transducer_vs_ctc(d, "relative", 2)[9] > 0 else ["seed 2 not above CTC"])),
    Claim("relative s3: against CTC", "1.00 % CER on the 2-3 s utterances decoded\n  alone (CTC's seed 3: {} %), {} % on "
          "the 160 s recordings decoded whole; in context {}× [{},\n  {}] at 160 s against CTC's {}× [{}, {}], paired {} "
          "[{}, {}] (seed 2: {})".replace("1.00", "{}"),
          lambda d: [*(v := _transducer_vs_ctc(d, "relative", 3))[:2], d.ladder((str(TRANSDUCER / "relative_transducer_s3"),),
                     "gap500ms", 160).whole, *v[2:], _transducer_vs_ctc(d, "relative", 2)[8]]),
    Fact("relative s3: like its CTC model", "Relative seed 3 degrades like its CTC model",
         lambda d: [] if (v := _transducer_vs_ctc(d, "relative", 3))[9] <= 0 <= v[10] else [f"paired {v[8:]}"]),
    Claim("relative s3: window chosen on dev", "The dev ladder chose `window:2.5` by a hair ({} % against {} % plain); "
          "test {} % against\n  {} % plain",
          lambda d: [*_transducer_window("relative_transducer_s3"),
                     (c := _transducer_choice("relative_transducer_s3"))["test_rate_chosen"], c["test_rate_plain"]]
          + ([] if c["chosen"] == "window:2.5" else [float("nan")])),
    Claim("RoPE s3: against CTC", "0.95 % CER on the 2-3 s utterances decoded alone\n  (CTC's seed 3: {} %), {} % on the 160 s "
          "recordings decoded whole; in context {}× [{},\n  {}] at 160 s against CTC's {}× [{}, {}], paired {} [{}, {}]. Its "
          "ratio grows\n  at every doubling again, from {}× at 5 s".replace("0.95", "{}"),
          lambda d: [*(v := _transducer_vs_ctc(d, "rope", 3))[:2], d.ladder((str(TRANSDUCER / "rope_transducer_s3"),),
                     "gap500ms", 160).whole, *v[2:], d.ladder((str(TRANSDUCER / "rope_transducer_s3"),), "gap500ms", 5).ratio]),
    Fact("RoPE s3: seed 2's story (more than CTC, rises, window chosen)", "RoPE seed 3 tells seed 2's story again",
         lambda d: ([] if _transducer_vs_ctc(d, "rope", 3)[9] > 0 else ["paired CI not above CTC"])
         + _transducer_rises([d.ladder((str(TRANSDUCER / "rope_transducer_s3"),), "gap500ms", r).ratio
                              for r in (5, 10, 20, 40, 80, 160)])
         + ([] if _transducer_choice("rope_transducer_s3")["chosen"] == "window:2.5" else ["window not chosen"])),
    Claim("RoPE s3: the window", "The dev ladder chose `window:2.5` ({} % against\n  {} % plain); on test {} % against {} % plain, "
          "and the 160 s recordings decode at {} % CER\n  with it, {}× [{}, {}] in context",
          lambda d: [*_transducer_window("rope_transducer_s3"), (c := _transducer_choice("rope_transducer_s3"))["test_rate_chosen"],
                     c["test_rate_plain"], *(lambda w: [w.whole, w.ratio, w.ci_low, w.ci_high])(
                         d.ladder((str(TRANSDUCER / "rope_transducer_s3"),), "gap500ms", 160, "_window2p5"))]),
    Claim("CAPE s3: against CTC and none", "3.53 % CER on the 2-3 s\n  utterances decoded alone (CTC's seed 3: {} %), {} % on "
          "the 160 s recordings decoded whole;\n  in context {}× [{}, {}] at 160 s against CTC's {}× [{}, {}], paired {} [{},\n  "
          "{}]. CAPE minus `none` at seed 3: {} [{}, {}] with the transducer, {} [{},\n  {}] with CTC".replace("3.53", "{}"),
          lambda d: [*(v := _transducer_vs_ctc(d, "cape", 3))[:2], d.ladder((str(TRANSDUCER / "cape_transducer_s3"),),
                     "gap500ms", 160).whole, *v[2:], *_transducer_pair(d, "cape", "none", "transducer", 3),
                     *_transducer_pair(d, "cape", "none", "ctc", 3)]),
    Fact("CAPE s3: like none with the transducer", "CAPE seed 3 again degrades like `none` with the transducer",
         lambda d: [] if (t := _transducer_pair(d, "cape", "none", "transducer", 3))[1] <= 0 <= t[2] else [f"transducer {t}"]),
    Claim("CAPE s3: window chosen on dev", "This time the dev ladder chose `window:2.5` ({} % against {} % plain), and\n  test was "
          "decoded with it: {} % against {} % plain",
          lambda d: [*_transducer_window("cape_transducer_s3"), (c := _transducer_choice("cape_transducer_s3"))["test_rate_chosen"],
                     c["test_rate_plain"]] + ([] if c["chosen"] == "window:2.5" else [float("nan")])),
    *[Claim(f"pooled table: {label}", f"| {label} | {{}} % ({{}} %) | {{}}× [{{}}, {{}}] | {{}}× [{{}}, {{}}] | {{}} [{{}}, {{}}] |"
            + (" | |" if pe == "none" or suffix else " {} [{}, {}] | {} [{}, {}] |"),
            lambda d, pe=pe, suffix=suffix: _transducer_pooled(d, pe, suffix)[:11 if pe == "none" or suffix else 17])
      for label, pe, suffix in (("`none`", "none", ""), ("sinusoidal", "sinusoidal", ""), ("RoPE", "rope", ""),
                                ("RoPE, `window:2.5`", "rope", "_window2p5"), ("relative", "relative", ""),
                                ("CAPE", "cape", ""))],
    Fact("pooled: RoPE with the window like its CTC model with the window", "With the window RoPE's transducer is where its "
         "CTC model is with the window (the difference's CI\nincludes 0)",
         lambda d: [] if (v := _transducer_pooled(d, "rope", "_window2p5"))[9] <= 0 <= v[10] else [f"paired {v[8:11]}"]),
    Fact("pooled: CAPE's transducer where none's is; with CTC a little more", "CAPE's transducer is where `none`'s is (its "
         "CI includes 0); with CTC CAPE degrades a\nlittle more than `none`",
         lambda d: ([] if (v := _transducer_pooled(d, "cape"))[12] <= 0 <= v[13] else [f"transducer {v[11:14]}"])
         + ([] if v[15] > 0 else [f"CTC {v[14:17]}"])),
    Claim("sinusoidal s3: against CTC", "decoded alone\n  3.25 % CER on the 2-3 s utterances (CTC's seed 3: {} %); in context {}× [{}, {}] at\n"
          "  160 s, CTC {}× [{}, {}], paired {} [{}, {}]. Sinusoidal minus `none` at seed 3:\n  +{} [+{}, +{}] with the "
          "transducer, +{} [+{}, +{}] with CTC".replace("3.25", "{}"),
          lambda d: [*_transducer_vs_ctc(d, "sinusoidal", 3), *_transducer_pair(d, "sinusoidal", "none", "transducer", 3),
                     *_transducer_pair(d, "sinusoidal", "none", "ctc", 3)]),
    Fact("sinusoidal s3: less than with CTC, more than none", "Sinusoidal seed 3 again degrades less than with CTC, more than `none`",
         lambda d: ([] if _transducer_vs_ctc(d, "sinusoidal", 3)[10] < 0 else ["not below CTC"])
         + ([] if _transducer_pair(d, "sinusoidal", "none", "transducer", 3)[1] > 0 else ["not above none"])),
    Fact("sinusoidal s3: rises at each doubling", "Its ratio rises at\n  each doubling again",
         lambda d: _transducer_rises([d.ladder((str(TRANSDUCER / "sinusoidal_transducer_s3"),), "gap500ms", r).ratio
                                      for r in (5, 10, 20, 40, 80, 160)])),
    Claim("sinusoidal s3: window:5 chosen on dev", "The dev ladder chose `window:5` ({} % against {} %\n  plain, `window:2.5` {} %); "
          "test {} % against {} % plain",
          lambda d: [(c := _transducer_choice("sinusoidal_transducer_s3"))["dev_rates"]["window:5"], c["dev_rates"]["plain"],
                     c["dev_rates"]["window:2.5"], c["test_rate_chosen"], c["test_rate_plain"]]
          + ([] if c["chosen"] == "window:5" else [float("nan")])),
    Claim("none s3: against CTC", "3.23 % CER on the 2-3 s utterances decoded alone\n  (CTC seed 3: {} %); in context {}× [{}, {}] "
          "at 160 s against CTC's {}× [{}, {}],\n  paired {} [{}, {}]".replace("3.23", "{}"),
          lambda d: [*(v := _transducer_vs_ctc(d, "none", 3))[:2], *v[2:]]),
    Fact("none s3: degrades as CTC does, as at seed 2", "at both seeds `none` degrades like CTC",
         lambda d: [f"seed {s}: paired {x[8:]}" for s in (2, 3) if not (x := _transducer_vs_ctc(d, "none", s))[9] <= 0 <= x[10]]),
    Claim("none s3: window chosen on dev", "ladder chose `window:2.5` ({} % against {} % plain); test {} % against {} % plain",
          lambda d: [*_transducer_window("none_transducer_s3"), (c := _transducer_choice("none_transducer_s3"))["test_rate_chosen"],
                     c["test_rate_plain"]] + ([] if c["chosen"] == "window:2.5" else [float("nan")])),
    Claim("CAPE s2: against CTC and none", "3.32 % CER on the\n  2-3 s utterances decoded alone (CTC {} %), {} % on the 160 s "
          "recordings decoded whole; in\n  context {}× [{}, {}] at 160 s against {}× [{}, {}], paired {} [{}, {}].\n  CAPE "
          "minus `none`, paired at 160 s: {} [{}, {}] with the transducer, +{} [+{},\n  +{}] with CTC".replace("3.32", "{}"),
          lambda d: [*(v := _transducer_vs_ctc(d, "cape", 2))[:2],
                     d.ladder((str(TRANSDUCER / "cape_transducer_s2"),), "gap500ms", 160).whole, *v[2:],
                     *_transducer_pair(d, "cape", "none", "transducer"), *_transducer_pair(d, "cape", "none", "ctc")]),
    Fact("CAPE s2: like none with the transducer, a little more with CTC", "CAPE degrades like `none` with the transducer",
         lambda d: ([] if (t := _transducer_pair(d, "cape", "none", "transducer"))[1] <= 0 <= t[2] else [f"transducer {t}"])
         + ([] if (c := _transducer_pair(d, "cape", "none", "ctc"))[1] > 0 else [f"CTC {c}"])),
    Claim("CAPE s2: plain kept", "(`window:2.5` {} % against {} %\n  plain), and test was decoded plainly only: {} %",
          lambda d: [*_transducer_window("cape_transducer_s2"),
                     (c := _transducer_choice("cape_transducer_s2"))["test_rate_plain"]]
          + ([] if c["chosen"] == "plain" and c["test_rate_chosen"] is None else [float("nan")])),
    Claim("relative s2: against CTC", "far better start**: {} % CER on the\n  2-3 s utterances decoded alone (CTC {} %), {} % on the 160 s "
          "recordings decoded whole; in\n  context {}× [{}, {}] at 160 s against {}× [{}, {}], paired +{} [+{}, +{}]",
          lambda d: [*(v := _transducer_vs_ctc(d, "relative", 2))[:2],
                     d.ladder((str(TRANSDUCER / "relative_transducer_s2"),), "gap500ms", 160).whole, *v[2:]]),
    Fact("relative s2: a little more than with CTC", "Relative degrades a little more than with CTC",
         lambda d: [] if _transducer_vs_ctc(d, "relative", 2)[9] > 0 else ["paired CI includes 0"]),
    Claim("relative s2: plain kept", "(`window:2.5` {} % against {} % plain), so the\n  rule kept the plain decoding, "
          "and test was decoded plainly only: {} %",
          lambda d: [*_transducer_window("relative_transducer_s2"),
                     (c := _transducer_choice("relative_transducer_s2"))["test_rate_plain"]]
          + ([] if c["chosen"] == "plain" and c["test_rate_chosen"] is None else [float("nan")])),
    Claim("RoPE s2: against CTC", "{} % CER on the 2-3 s utterances\n  decoded alone (CTC {} %), {} % on the 160 s "
          "recordings decoded whole; in context {}× [{},\n  {}] at 160 s against {}× [{}, {}], paired +{} [+{}, +{}]. "
          "Its ratio grows at every\n  doubling of the ladder, from {}× at 5 s",
          lambda d: [*(v := _transducer_vs_ctc(d, "rope", 2))[:2], d.ladder((str(TRANSDUCER / "rope_transducer_s2"),),
                     "gap500ms", 160).whole, *v[2:], d.ladder((str(TRANSDUCER / "rope_transducer_s2"),), "gap500ms", 5).ratio]),
    Fact("RoPE s2: grows at every doubling", "Its ratio grows at every\n  doubling of the ladder",
         lambda d: _transducer_rises([d.ladder((str(TRANSDUCER / "rope_transducer_s2"),), "gap500ms", x).ratio
                                      for x in (5, 10, 20, 40, 80, 160)])),
    Claim("RoPE s2: the window", "`window:2.5` gives {} %\n  against {} % plain (every no-gap rung), and on test {} % "
          "against {} %. With it the 160 s\n  recordings decode at {} % CER, {}× [{}, {}] in context (`none`'s "
          "transducer {} %;\n  RoPE's CTC with the window {} %, {}×)",
          lambda d: [*_transducer_window("rope_transducer_s2"),
                     (c := _transducer_choice("rope_transducer_s2"))["test_rate_chosen"], c["test_rate_plain"],
                     *_transducer_rope_window(d),
                     d.ladder((str(TRANSDUCER / "none_transducer_s2"),), "gap500ms", 160).whole,
                     (w := d.ladder((str(LADDER / "rope_ctc_s2"),), "gap500ms", 160, "_window2p5")).whole, w.ratio]),
    Claim("the window on dev", "`none`'s `window:2.5` ({} %) and plain\n  decoding ({} %) are within {} points; "
          "sinusoidal's `window:2.5` gives {} % against {} %\n  plain",
          lambda d: [*(w := _transducer_window("none_transducer_s2")), abs(w[0] - w[1]),
                     *_transducer_window("sinusoidal_transducer_s2")]),
    Fact("the window chosen by the rule", "The window was chosen by the rule (lowest dev CER) for all three",
         lambda d: [str(c) for r in ("none_transducer_s2", "sinusoidal_transducer_s2", "rope_transducer_s2")
                    for c in [_transducer_choice(r)]
                    if c["chosen"] != min(c["dev_rates"], key=c["dev_rates"].get)]),
]

# RESULTS.md's summary of the transducer arm
CLAIMS += [
    Fact("transducer: the runs", "All 10 runs (5 PEs, seeds 2 and 3)", _transducer_runs_archived),
    Fact("transducer: RoPE needs the window more than with CTC", "a transducer with RoPE still needs the window, "
         "more than CTC does",
         lambda d: ([] if _transducer_pooled(d, "rope")[9] > 0 else ["paired CI not above CTC"])
         + [f"seed {s}: window:2.5 not chosen" for s in (2, 3)
            if _transducer_choice(f"rope_transducer_s{s}")["chosen"] != "window:2.5"]),
    Claim("transducer: in context (seeds 2-3)", "RoPE {}× [{}, {}] (CTC {}×), {}×\nwith `window:2.5` "
          "(chosen on dev); sinusoidal {}× (CTC {}×); `none` {}× (CTC {}×); relative {}× (CTC {}×); CAPE {}× (CTC {}×)",
          lambda d: [*(v := _transducer_pooled(d, "rope"))[2:6], _transducer_pooled(d, "rope", "_window2p5")[2],
                     *[w[i] for pe in ("sinusoidal", "none", "relative", "cape")
                       for w in [_transducer_pooled(d, pe)]
                       for i in (2, 5)]]),
    Claim("transducer: more accurate (seeds 2-3)", "{} % CER for `none` on the 2-3 s utterances decoded alone, {} %\nwith CTC",
          lambda d: _transducer_pooled(d, "none")[:2]),
]

DOCUMENTS = {RECIPE / "RESULTS.md": CLAIMS, ATTENTION_S4.parent / "README.md": ATTENTION_NOTE_CLAIMS, STUDY / "retrain" / "README.md": RETRAIN_NOTE_CLAIMS,
             STUDY / "hybrid" / "README.md": HYBRID_NOTE_CLAIMS, LADDER / "README.md": LADDER_NOTE_CLAIMS,
             STUDY / "seeds" / "README.md": SEEDS_NOTE_CLAIMS, STUDY / FT / "README.md": FINETUNE_NOTE_CLAIMS,
             STUDY / "remedies_report" / "README.md": REMEDIES_NOTE_CLAIMS, TRANSDUCER / "README.md": TRANSDUCER_NOTE_CLAIMS}
# issue 45: study/rate/README.md and study/natural_bins/README.md, their claims (and those of what
# RESULTS.md says of them) in claims_rate.py and claims_natural_bins.py (run by path: recipes/ is no package)
_RATE = __import__("runpy").run_path(str(RECIPE / "claims_rate.py"))
_NATURAL_BINS = __import__("runpy").run_path(str(RECIPE / "claims_natural_bins.py"))
DOCUMENTS.update(_RATE["RATE_DOCUMENTS"])
DOCUMENTS.update(_NATURAL_BINS["NATURAL_BINS_DOCUMENTS"])
# issue 45 point 4: study/cape_parts/README.md (claims_cape_parts.py)
_CAPE_PARTS = __import__("runpy").run_path(str(RECIPE / "claims_cape_parts.py"))
DOCUMENTS.update(_CAPE_PARTS["CAPE_PARTS_DOCUMENTS"])
CLAIMS += _CAPE_PARTS["CAPE_PARTS_RESULTS_CLAIMS"]
# issue 48 point 4: study/finetune160/README.md (claims_finetune160.py)
_FINETUNE160 = __import__("runpy").run_path(str(RECIPE / "claims_finetune160.py"))
DOCUMENTS.update(_FINETUNE160["FINETUNE160_DOCUMENTS"])
CLAIMS += _FINETUNE160["FINETUNE160_RESULTS_CLAIMS"]
CLAIMS += _RATE["RATE_RESULTS_CLAIMS"] + _NATURAL_BINS["NATURAL_BINS_RESULTS_CLAIMS"]


def copied_rows(report: str) -> list[str]:
    """RESULTS.md's main study table copies study/summary.md without its in-context column: every
    row of that table (a PE and ``0, 1`` in its first two cells, 11 cells) must be the generated
    row with that column left out."""
    generated = markdown_rows((STUDY / "summary.md").read_text(encoding="utf-8"))
    bad, seen = [], 0
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) == 11 and cells[0] in STUDY_PES and cells[1] == "0, 1":
            seen += 1
            want = generated.get(cells[0])
            if want is None or cells != want[:2] + want[3:]:
                bad.append(f"main table row {cells[0]} differs from study/summary.md: {line}")
    return bad + ([] if seen == len(STUDY_PES) else [f"main table: {seen} PE rows, expected {len(STUDY_PES)}"])


def failures(data: StudyData | None = None) -> list[str]:
    data = data or study_data()
    out = []
    for path, claims in DOCUMENTS.items():
        text = path.read_text(encoding="utf-8")
        out += [f"{path.relative_to(RECIPE)}: {f.name}: {f.message}" for f in check_claims(text, claims, data)]
    return out + copied_rows((RECIPE / "RESULTS.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    problems = failures()
    print("\n".join(problems) or f"all {sum(map(len, DOCUMENTS.values()))} claims agree with the archived runs")
    sys.exit(1 if problems else 0)
