"""Every number of recipes/synth/study/finetune160/README.md (issue 48 point 4: the RoPE controls
fine-tuned to 160 s), computed from the archived runs in study/finetune160/ with backlog.py's own
dev choice (`choose`: CER pooled over the dev ladder's two 160 s rungs, Σ char errors / Σ reference
chars). Same machinery as recipes/synth/claims.py, which adds `FINETUNE160_DOCUMENTS` to its DOCUMENTS.
"""

from __future__ import annotations

import math
import runpy
from functools import lru_cache
from pathlib import Path

from asr_pe.plots.results_claims import LONG, Claim, Fact, supports

STUDY = Path(__file__).resolve().parent / "study"
README = STUDY / "finetune160" / "README.md"
DEV_SETS = ["ladder_dev_gap500ms_160", "ladder_dev_nogap_160"]
# the plain fine-tune's grid at seed 2, in the README's order: (lr, steps)
PLAIN_GRID = (("3e-4", 100), ("3e-4", 300), ("1e-3", 100), ("1e-3", 300))


@lru_cache(maxsize=None)
def _choose(candidates: tuple[str, ...]) -> dict:
    backlog = runpy.run_path(str(STUDY / "backlog.py"), run_name="claims")
    return backlog["choose"](STUDY / "finetune160", list(candidates), DEV_SETS)


# seed 2 on test: the README's rows, (run name without _ctc_s<seed>, decoding suffix of the eval sets)
GRID_METHODS = ("rope", "rope_pi", "rope_yarn_b10", "rope_yarn_b32", "rope_shortft")
WINDOWS = ("window:2.5", "window:5")
CHOSEN = "_ft160_lr1e-3_st300"   # every method's dev choice at seed 2; the Fact on `_corner_everywhere` checks it
TEST_ROWS = {"source, plain": ("source_rope", ""), "source, window": ("source_rope", "_window2p5"),
             "plain fine-tune": ("rope" + CHOSEN, ""), "PI, s = 32": ("rope_pi" + CHOSEN, ""),
             "YaRN, β 10": ("rope_yarn_b10" + CHOSEN, ""), "YaRN, β 32": ("rope_yarn_b32" + CHOSEN, ""),
             "continuation control, plain": ("rope_shortft" + CHOSEN, ""),
             "continuation control, window": ("rope_shortft" + CHOSEN, "_window2p5"),
             "yardstick": ("rope_yardstick160", "")}
SEED_2_ROWS = list(TEST_ROWS)
YARDSTICK_LABEL = "yardstick, from scratch at ≤ 160 s"


def grid_choice(method: str, window: str | None = None) -> dict:
    """Seed 2's dev choice among ``method``'s grid runs (``rope``, ``rope_pi``, ...), in the grid's
    order; ``window``: each decoded with that window only (``window:2.5``)."""
    return _choose(tuple(f"{method}_ft160_lr{lr}_st{steps}_ctc_s2" + (f"@{window}" if window else "")
                         for lr, steps in PLAIN_GRID))


def plain_choice() -> dict:
    return grid_choice("rope")


def _dev(method: str, window: str | None = None) -> list[float]:
    return list(grid_choice(method, window)["dev_cer"].values())


def _over_plain(method: str) -> list[float]:
    """``method``'s dev CER over the plain fine-tune's, cell by cell of the grid."""
    return [m / plain for m, plain in zip(_dev(method), _dev("rope"))]


def _corner_everywhere() -> list[str]:
    """Which methods' dev choice (the windowed control over both windows) is not lr 1e-3 with 300 steps."""
    choices = {m: grid_choice(m)["chosen"] for m in GRID_METHODS if m != "rope_shortft"}
    choices["rope_shortft"] = _choose(tuple(f"rope_shortft_ft160_lr{lr}_st{steps}_ctc_s2@{w}" for lr, steps in PLAIN_GRID
                                            for w in WINDOWS))["chosen"].split("@")[0]
    return [f"{m}: {c}" for m, c in choices.items() if c != f"{m}_ft160_lr1e-3_st300_ctc_s2"]


def _paths(d, row: str, seeds=(2,)) -> tuple:
    return d.paths("finetune160", TEST_ROWS[row][0], seeds, "ctc")


def _cer(d, row: str, bucket: str, seeds=(2,)) -> float:
    """A row's CER %: a test bucket, or "160" for the long-form set (same decoding)."""
    suffix = TEST_ROWS[row][1]
    return d.value(_paths(d, row, seeds), f"longform{suffix}", LONG) if bucket == "160" else \
        d.value(_paths(d, row, seeds), f"test{suffix}", bucket)


def _row(d, row: str, seeds=(2,)) -> list[float]:
    c = d.in_context(_paths(d, row, seeds), "longform" + TEST_ROWS[row][1], "test" + TEST_ROWS[row][1]).pooled
    return [*(_cer(d, row, b, seeds) for b in ("2-4", "32-64", "160")), c.ratio, c.ci_low, c.ci_high]


def _paired(d, a: str, b: str, set_name: str = "longform", lo: float = 0.0, hi: float = math.inf,
            seeds=(2,)) -> list[float]:
    """Row ``a`` minus row ``b`` in points, paired over the utterances (each with its own decoding)."""
    from asr_pe.evaluation.length_ratio import difference_ci

    sa, sb = (d.series(_paths(d, r, seeds), set_name + TEST_ROWS[r][1]) for r in (a, b))
    out = difference_ci([r.run_dir / "eval" / r.test_set for r in sa.runs],
                        [r.run_dir / "eval" / r.test_set for r in sb.runs], lo=lo, hi=hi, n_boot=d.n_boot)
    assert out is not None, f"{a} vs {b}: no paired difference on {set_name}"
    return list(out)


def _seed_table(seed: int, rows: tuple[tuple[str, str], ...]) -> list:
    """A seed's table of chosen models on test: (row of `TEST_ROWS`, its label in the table)."""
    return [Claim(f"seed {seed} on test: {row}", f"| {seed} | {label} | {{}} | {{}} | {{}} | {{}}× [{{}}, {{}}] |",
                  lambda d, row=row: _row(d, row, (seed,))) for row, label in rows]


def _source_digests(seed: int = 2, key: str = "sha256") -> dict[str, str]:
    """Each archived fine-tune of ``seed``'s source -> the sha256 of the checkpoint it started from (``key``
    "weights_sha256": of its weights, where the record has it)."""
    from asr_pe.results_table import read_table, table_of

    out = {}
    for run, rows in read_table(table_of(STUDY / "finetune160")).items():
        init = next(r["data"] for r in rows if r["path"] == "run_info.json").get("init_from") or {}
        if str(init.get("run", "")).endswith(f"/source_rope_ctc_s{seed}"):
            out[run] = init.get(key)
    return out


FINETUNE160_CLAIMS = [
    Claim("plain fine-tune, seed 2: dev CER of the grid",
          "The plain fine-tune's four grid runs gave {} % with lr 3e-4 and 100 steps, {} % with 3e-4 and 300, {} % with "
          "1e-3 and 100, and {} % with 1e-3 and 300", lambda d: _dev("rope")),
    Fact("plain fine-tune, seed 2: the lowest at the grid's corner", "The lowest is the grid's corner, the higher lr with the\nmore steps",
         lambda d: [] if plain_choice()["chosen"] == "rope_ft160_lr1e-3_st300_ctc_s2" else [plain_choice()["chosen"]]),
    Fact("plain fine-tune, seed 2: more steps lower at either lr", "more steps gave the lower dev CER at either lr",
         lambda d: [f"lr {lr}" for lr in ("3e-4", "1e-3")
                    if not plain_choice()["dev_cer"][f"rope_ft160_lr{lr}_st300_ctc_s2"]
                    < plain_choice()["dev_cer"][f"rope_ft160_lr{lr}_st100_ctc_s2"]]),
    Fact("every method's lowest at the corner", "Every method's lowest is that same corner (lr 1e-3, 300 steps)",
         lambda d: _corner_everywhere()),
    Claim("PI, seed 2: dev CER of the grid, over plain cell by cell",
          "**PI** (s = 32): {} %, {} %, {} % and {} %; each cell {}-{}× the plain fine-tune's cell of the same lr and steps",
          lambda d: _dev("rope_pi") + [min(_over_plain("rope_pi")), max(_over_plain("rope_pi"))]),
    Claim("YaRN b10, seed 2: dev CER of the grid", "**YaRN, β 10**: {} %, {} %, {} % and {} %", lambda d: _dev("rope_yarn_b10")),
    Claim("YaRN b32, seed 2: dev CER of the grid", "**YaRN, β 32**: {} %, {} %, {} % and {} %", lambda d: _dev("rope_yarn_b32")),
    Fact("both YaRN grids above plain in every cell", "Both YaRN grids are above the plain fine-tune's in every cell",
         lambda d: [f"{m} cell {i}" for m in ("rope_yarn_b10", "rope_yarn_b32") for i, r in enumerate(_over_plain(m)) if not r > 1]),
    Claim("continuation control, seed 2: dev CER of the grid, both windows",
          "with the ±2.5 s window {} %, {} %, {} % and {} %, with ±5 s {} %, {} %, {} % and {} %",
          lambda d: _dev("rope_shortft", "window:2.5") + _dev("rope_shortft", "window:5")),
    Fact("continuation control: ±2.5 s lower in every cell", "±2.5 s is the lower in every cell",
         lambda d: [f"cell {i}" for i, (a, b) in enumerate(zip(_dev("rope_shortft", "window:2.5"), _dev("rope_shortft", "window:5")))
                    if not a < b]),
    Claim("the source's window, seed 2", "**The source's window**: ±2.5 s {} %, ±5 s {} %",
          lambda d: list(_choose(tuple(f"source_rope_ctc_s2@{w}" for w in WINDOWS))["dev_cer"].values())),
    Fact("every fine-tune of seed 2 from one source", "Every archived fine-tune of seed 2 started from one source checkpoint",
         lambda d: [] if len(set(_source_digests().values())) == 1 and len(_source_digests()) >= 8
         else [f"digests {sorted(set(_source_digests().values()))} over {len(_source_digests())} runs"]),
    Fact("the source's digest", "`best.ckpt` with sha256\n81cdec975abae859…",
         lambda d: [] if all(v.startswith("81cdec975abae859") for v in _source_digests().values())
         else sorted(set(_source_digests().values()))),
]
FINETUNE160_CLAIMS += [
    Claim(f"seed 2 on test: {row}", f"| {YARDSTICK_LABEL if row == 'yardstick' else row} | {chosen} | {{}} | {{}} | {bold} "
          f"| {{}}× [{{}}, {{}}] |", lambda d, row=row: _row(d, row))
    for row, chosen, bold in (("source, plain", "–", "{}"), ("source, window", "±2.5 s", "{}"),
                              ("plain fine-tune", "lr 1e-3, 300 steps", "**{}**"), ("PI, s = 32", "lr 1e-3, 300 steps", "{}"),
                              ("YaRN, β 10", "lr 1e-3, 300 steps", "{}"), ("YaRN, β 32", "lr 1e-3, 300 steps", "{}"),
                              ("continuation control, plain", "lr 1e-3, 300 steps", "{}"),
                              ("continuation control, window", "lr 1e-3, 300 steps, ±2.5 s", "{}"), ("yardstick", "–", "{}"))
]
FINETUNE160_CLAIMS += [
    Claim("seed 2: plain fine-tune lowest at 160 s, below the windowed source",
          "has the lowest CER at 160 s, {} %. It is {} points below the source decoded with its window ({} [{}, {}])",
          lambda d: [_cer(d, "plain fine-tune", "160"), -(p := _paired(d, "plain fine-tune", "source, window"))[0], *p]),
    Fact("seed 2: the plain fine-tune the lowest at 160 s, below the windowed source (paired)", "has the lowest CER at 160 s",
         lambda d: [r for r in SEED_2_ROWS if r != "plain fine-tune" and not _cer(d, r, "160") > _cer(d, "plain fine-tune", "160")]
         + ([] if _paired(d, "plain fine-tune", "source, window")[2] < 0 else ["CI against the windowed source includes 0"])),
    Claim("seed 2: plain fine-tune against the windowed continuation control, and that control against the windowed source",
          "continuation control decoded with its window ({} [{}, {}]). That control had 300 more steps on the study's ≤ 5 s "
          "utterances, and it is itself below the windowed source ({} [{}, {}])",
          lambda d: _paired(d, "plain fine-tune", "continuation control, window")
          + _paired(d, "continuation control, window", "source, window")),
    Fact("seed 2: not distinguishable from the windowed control; the control below the windowed source",
         "the long inputs add nothing measurable once the window is used",
         lambda d: ([] if (p := _paired(d, "plain fine-tune", "continuation control, window"))[1] < 0 < p[2]
                    else ["the plain fine-tune and the windowed control are apart"])
         + ([] if _paired(d, "continuation control, window", "source, window")[2] < 0 else ["control not below the source"])),
    Claim("seed 2: the rescalings against the plain fine-tune",
          "are worse than the plain fine-tune: YaRN β 10 by {} [{}, {}], YaRN β 32 by {} [{}, {}], and PI by {} [{}, {}]",
          lambda d: [v for r in ("YaRN, β 10", "YaRN, β 32", "PI, s = 32") for v in _paired(d, r, "plain fine-tune")]),
    Fact("seed 2: every rescaling worse (paired CI above 0)", "are worse than the plain fine-tune:",
         lambda d: [r for r in ("YaRN, β 10", "YaRN, β 32", "PI, s = 32") if not _paired(d, r, "plain fine-tune")[1] > 0]),
    Claim("seed 2: PI at 2-4 s against the plain fine-tune", "({} % against {} % at 2-4 s)",
          lambda d: [_cer(d, "PI, s = 32", "2-4"), _cer(d, "plain fine-tune", "2-4")]),
    Fact("seed 2: PI about twice the plain fine-tune at every length", "PI's error is about twice the plain\n  fine-tune's at every length",
         lambda d: [b for b in ("2-4", "32-64", "160")
                    if not 1.8 < _cer(d, "PI, s = 32", b) / _cer(d, "plain fine-tune", b) < 2.5]),
    Claim("seed 2: the plain fine-tune's cost at 2-4 s", "the plain fine-tune minus the source at\n  2-4 s is {} [{}, {}], a CI that includes 0",
          lambda d: _paired(d, "plain fine-tune", "source, plain", "test", 2.0, 4.0)),
    Fact("seed 2: the cost's CI includes 0", "a CI that includes 0",
         lambda d: [] if (p := _paired(d, "plain fine-tune", "source, plain", "test", 2.0, 4.0))[1] < 0 < p[2] else ["apart"]),
]
SEED_ROWS = (("source, plain", "source, plain"), ("source, window", "source, window ±2.5 s"),
             ("plain fine-tune", "plain fine-tune"), ("PI, s = 32", "PI, s = 32"),
             ("YaRN, β 10", "YaRN, β 10"), ("YaRN, β 32", "YaRN, β 32"),
             ("continuation control, plain", "continuation control, plain"),
             ("continuation control, window", "continuation control, window ±2.5 s"), ("yardstick", YARDSTICK_LABEL))
FINETUNE160_CLAIMS += _seed_table(3, SEED_ROWS) + _seed_table(4, SEED_ROWS)


def _pooled_row(d, row: str, seeds: tuple[int, ...]) -> list[float]:
    """Over ``seeds``: CER at 2-4 s and at 160 s, the in-context ratio with its CI, and 160 s minus the plain
    fine-tune (paired), for the pooled table."""
    ratio = _row(d, row, seeds)
    return [_cer(d, row, "2-4", seeds), _cer(d, row, "160", seeds), *ratio[3:],
            *(_paired(d, row, "plain fine-tune", seeds=seeds) if row != "plain fine-tune" else [])]


def _worse_at_every_seed(d, rows: tuple[str, ...], seeds: tuple[int, ...]) -> list[str]:
    """The rows whose paired difference from the plain fine-tune at 160 s is not above 0 at some seed."""
    return [f"{r} at seed {s}" for r in rows for s in seeds if not _paired(d, r, "plain fine-tune", seeds=(s,))[1] > 0]


def _yardstick_against(d, seed: int) -> list[str]:
    """The yardstick of ``seed`` worse at 160 s than every fine-tune but PI and the windowed source, below PI, and
    better on long inputs than on short (paired CIs; in-context CI below 1)."""
    rivals = ("plain fine-tune", "YaRN, β 10", "YaRN, β 32", "source, window", "continuation control, window")
    return ([e for r in rivals for e in supports("worse", _paired(d, "yardstick", r, seeds=(seed,)), r)]
            + supports("better", _paired(d, "yardstick", "PI, s = 32", seeds=(seed,)), "PI")
            + ([] if _row(d, "yardstick", (seed,))[5] < 1 else ["in-context CI reaches 1"]))


# the pooled table: every row over seeds 2-4
SEEDS = (2, 3, 4)
POOLED = tuple((row, label) for row, label in SEED_ROWS if row not in ("source, plain", "continuation control, plain"))
RESCALINGS = ("PI, s = 32", "YaRN, β 10", "YaRN, β 32")


def _lowest_at_160(d) -> list[str]:
    """The pooled rows not above the plain fine-tune at 160 s by a paired CI over seeds 2-4 ("lowest" is a
    paired claim too)."""
    return [e for row, _ in POOLED if row != "plain fine-tune"
            for e in supports("worse", _paired(d, row, "plain fine-tune", seeds=SEEDS), row)]


def _each_seed(d, a: str, b: str, *where) -> list[float]:
    """Row ``a`` minus row ``b`` at each seed of `SEEDS` in turn (`_paired`'s set and bucket: ``where``)."""
    return [v for s in SEEDS for v in _paired(d, a, b, *where, seeds=(s,))]


CELLS = " | ".join(["{} [{}, {}]"] * len(SEEDS))   # a row of the each-seed table: one paired CI per seed
FINETUNE160_CLAIMS += [
    Claim(f"seeds 2-4: {row} pooled", f"| {label} | {{}} | {{}} | {{}}× [{{}}, {{}}] | "
          + ("– |" if row == "plain fine-tune" else "{} [{}, {}] |"), lambda d, row=row: _pooled_row(d, row, SEEDS))
    for row, label in POOLED
] + [
    Claim(f"each seed: {row} minus the plain fine-tune at 160 s", f"| {label} | {CELLS} |",
          lambda d, row=row: _each_seed(d, row, "plain fine-tune"))
    for row, label in POOLED if row != "plain fine-tune"
] + [
    Claim("each seed: the windowed continuation control minus the windowed source",
          f"| continuation control, window, minus the source, window | {CELLS} |",
          lambda d: _each_seed(d, "continuation control, window", "source, window")),
    Claim("each seed: the plain fine-tune minus the source at 2-4 s", f"| plain fine-tune minus the source, at 2-4 s | {CELLS} |",
          lambda d: _each_seed(d, "plain fine-tune", "source, plain", "test", 2.0, 4.0)),
    Claim("seeds 2-4: the rescalings against the plain fine-tune",
          "are worse than the plain fine-tune at 160 s at every seed, each seed's paired CI above 0: PI by {} [{}, {}]\n"
          "points, YaRN β 10 by {} [{}, {}] and β 32 by {} [{}, {}]",
          lambda d: [v for r in RESCALINGS for v in _paired(d, r, "plain fine-tune", seeds=SEEDS)]),
    Fact("seeds 2-4: every rescaling worse at every seed (paired)", "each seed's paired CI above 0",
         lambda d: _worse_at_every_seed(d, RESCALINGS, SEEDS)),
    Fact("seeds 2-4: the plain fine-tune the lowest at 160 s (paired)", "The plain fine-tune to 160 s is the lowest at\n160 s",
         _lowest_at_160),
    Claim("seeds 2-4: the plain fine-tune against the windowed source, its cost at 2-4 s",
          "below the windowed source at every seed ({} [{}, {}] points over seeds 2-4), at no measurable\ncost on short "
          "inputs ({} [{}, {}] at 2-4 s)",
          lambda d: _paired(d, "plain fine-tune", "source, window", seeds=SEEDS)
          + _paired(d, "plain fine-tune", "source, plain", "test", 2.0, 4.0, seeds=SEEDS)),
    Fact("seeds 2-4: below the windowed source at every seed, no cost at 2-4 s at any seed (paired)",
         "below the windowed source at every seed",
         lambda d: [e for s in SEEDS for e in supports("better", _paired(d, "plain fine-tune", "source, window", seeds=(s,)), f"seed {s}")]
         + [e for s in (SEEDS, *((s,) for s in SEEDS))
            for e in supports("like", _paired(d, "plain fine-tune", "source, plain", "test", 2.0, 4.0, seeds=s), f"2-4 s, {s}")]),
    Claim("seeds 2-4: the windowed continuation control against the plain fine-tune",
          "above the plain fine-tune over seeds 2-4 ({} [{}, {}] points)",
          lambda d: _paired(d, "continuation control, window", "plain fine-tune", seeds=SEEDS)),
    Claim("seeds 2-4: the windowed continuation control against the windowed source, and the plain fine-tune's gain",
          "below the windowed source at each seed, by {} [{}, {}] points over seeds 2-4 against the plain fine-tune's {}",
          lambda d: _paired(d, "continuation control, window", "source, window", seeds=SEEDS)
          + _paired(d, "plain fine-tune", "source, window", seeds=SEEDS)[:1]),
    Fact("the 300 more steps give more than half of the plain fine-tune's gain over the windowed source, each seed",
         "the 300 more steps give more than half of the plain fine-tune's gain at every seed",
         lambda d: [f"seed {s}" for s in SEEDS
                    if not _paired(d, "continuation control, window", "source, window", seeds=(s,))[0]
                    < 0.5 * _paired(d, "plain fine-tune", "source, window", seeds=(s,))[0]]),
    Fact("every seed: the windowed continuation control below the windowed source (paired)",
         "decoded with its window, is below the windowed source at each seed",
         lambda d: [e for s in SEEDS for e in supports("better", _paired(d, "continuation control, window", "source, window",
                                                                         seeds=(s,)), f"seed {s}")]),
    Fact("the windowed continuation control above the plain fine-tune over seeds 2-4 and at seeds 3, 4, not at 2 (paired)",
         "apart from it at seeds 3 and 4 but not at seed 2",
         lambda d: supports("worse", _paired(d, "continuation control, window", "plain fine-tune", seeds=SEEDS), "seeds 2-4")
         + [e for s in (3, 4) for e in supports("worse", _paired(d, "continuation control, window", "plain fine-tune",
                                                                  seeds=(s,)), f"seed {s}")]
         + supports("like", _paired(d, "continuation control, window", "plain fine-tune", seeds=(2,)), "seed 2")),
    Fact("every seed: the yardstick worse than every fine-tune but PI, below PI, better on long inputs (paired)",
         "1100 steps from scratch at 160 s, the yardstick",
         lambda d: [f"seed {s}: {e}" for s in SEEDS for e in _yardstick_against(d, s)]),
]
# RESULTS.md's opening on the rescalings
FINETUNE160_RESULTS_CLAIMS = [
    Claim("the rescalings fine-tuned to 160 s, as published",
          "the rescalings still lose to a plain fine-tune at every seed: PI {} %, YaRN β 10 {} % and β 32 {} % at 160 s\n"
          "against {} % (seeds 2-4; {} [{}, {}], {} [{}, {}] and {} [{}, {}] points, paired)",
          lambda d: [_cer(d, r, "160", SEEDS) for r in (*RESCALINGS, "plain fine-tune")]
          + [v for r in RESCALINGS for v in _paired(d, r, "plain fine-tune", seeds=SEEDS)]),
    Fact("the rescalings fine-tuned to 160 s lose at every seed (paired)", "the rescalings still lose to a plain fine-tune at every seed",
         lambda d: _worse_at_every_seed(d, RESCALINGS, SEEDS)),
]


def _utts(d, row: str, set_name: str, seed: int) -> list[dict]:
    """The per-utterance rows of ``row`` at ``seed`` on ``set_name`` (its decoding)."""
    import json
    from asr_pe.results_table import locate
    path = locate(Path(_paths(d, row, (seed,))[0]) / "eval" / (set_name + TEST_ROWS[row][1]) / "per_utt.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _archived_source(seed: int) -> dict:
    """``sources/source_rope_ctc_s<seed>/source.json``: the archived source weights' record (backlog.py export-source)."""
    import json
    return json.loads((STUDY / "finetune160" / "sources" / f"source_rope_ctc_s{seed}" / "source.json").read_text())


def _source_retrained() -> dict:
    """The seed-3 source trained again on 2026-12-04 against the archived one (reports/source_retrained.jsonl)."""
    import json
    return json.loads((STUDY / "finetune160" / "reports" / "source_retrained.jsonl").read_text().splitlines()[0])


FINETUNE160_CLAIMS += [
    Claim("seed 3's source trained again: another model", "its test hypotheses differ from the archived source's in {} "
          "of {} ({} char\nerrors against {})",
          lambda d: [(r := _source_retrained())["test"]["differing"], r["test"]["utterances"], *r["test"]["char_errors"]]),
    Fact("seed 3's source trained again: not the archived bytes, one weights digest in two files",
         "it gave the same weights\n(one weights digest) in two different files",
         lambda d: [] if ((b := _source_retrained()["best_ckpt"])["sha256"] != b["sha256_archived_fine_tunes_name"]
                          and b["weights_sha256"] == b["another_work_folder"]["weights_sha256"]
                          and b["sha256"] != b["another_work_folder"]["sha256"]
                          and not _source_retrained()["reproduced"]) else [str(b)]),
    Fact("seed 3: every fine-tune from the weights trained again (weights digest), and archived",
         "Every fine-tune of seed 3 here names those weights",
         lambda d: [] if set(_source_digests(3, "weights_sha256").values()) == {_source_retrained()["best_ckpt"]["weights_sha256"]}
         == {_archived_source(3)["weights_sha256"]} and len(_source_digests(3)) == len(GRID_METHODS)
         else [str(_source_digests(3, "weights_sha256"))]),
    Fact("seed 3's source archived now: the one trained again on 2026-12-04 (its test char errors)",
         "the retrained source of 2026-12-04, the same weights",
         lambda d: [] if sum(u["char_errors"] for u in _utts(d, "source, plain", "test", 3))
         == _source_retrained()["test"]["char_errors"][0] else ["other char errors on test"]),
    Fact("seed 3's source: the machines", "trained again on an AMD EPYC guest (1 thread; the archived runs: an Intel Xeon)",
         lambda d: [] if "EPYC" in (r := _source_retrained())["retrained_on"]["cpu"]
         and all("Xeon" in m["cpu"] for m in r["archived_on"]) else [str(r)]),
]


FINETUNE160_DOCUMENTS = {README: FINETUNE160_CLAIMS}
