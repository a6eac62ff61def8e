"""Quantitative sentences of a results report, checked against the archived result files.

A report such as ``recipes/synth/RESULTS.md`` quotes hundreds of numbers; prose drifts from data
when a table is regenerated and a sentence is not. Here each quantitative statement is a `Claim`:
a template that must occur in the report, with ``{}`` where a number stands, and a function that
computes those numbers from the archived runs. `check_claims` finds the template in the report
(its literal text exact, the numbers any decimal, so that a changed number is reported as a wrong
number, not as a missing sentence), parses the printed numbers and compares each with the computed
one to the printed rounding: a number printed with d decimals is right when it is within
0.5 * 10**-d of the computed value. A statement in words ("both seeds", "every PE except") is a
claim whose function returns its counter-evidence (`Fact`): an empty list when it holds.

The values are computed only through the project's public readers (`load_runs` / `aggregate`,
`label_in_context`, `ratio_ci`, `difference_ci`, `read_attention_stats`) from run paths such as
``recipes/synth/study/runs/rope_ctc_s0``, never by opening the files inside a run folder, so the
checks do not depend on how a run's results are stored. `StudyData` caches them.

Every number of a claim is compared; a claim fails when its template is missing or occurs more
than once (make it longer), so an edited sentence cannot silently drop out of the check.

Comparative words ("worse", "better", "like", "no better", "best", "degrades more") are checked
with a paired interval (`supports`): A − B with its 95 % CI, from `StudyData.difference` (error
rates), `StudyData.in_context_difference` (in-context ratios of the long-form set) or
`StudyData.ladder_difference` (in-context ratios of a ladder rung). Those intervals resample the
test utterances or recordings once per draw for every seed of both systems (paired), and never
the seeds: they are CIs over the test audio for these trained models.

The length ladder (`StudyData.ladder`) is read from its archived runs and the ladder's
composition file (``ladder_composition``), through `run_ladder` / `pool_runs`, as
`scripts/plot_dose_response.py` does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from asr_pe.evaluation.in_context import InContextResult, read_parts
from asr_pe.evaluation.length_ratio import difference_ci

from .in_context_table import LabelInContext, label_in_context
from .study_summary import ratio_ci, read_attention_stats
from .wer_vs_length import ALL_LABEL, LabelSeries, aggregate, load_runs

__all__ = ["Claim", "Fact", "ClaimFailure", "StudyData", "check_claims", "number_pattern", "markdown_rows",
           "LONG", "NUMBER", "paired_ratio_difference", "supports", "COMPARATIVES"]

LONG = ALL_LABEL                                   # the long-form set's one bucket (every recording)
NUMBER = r"([−+-]?\d+(?:\.\d+)?)"                  # a printed number; "−" is the report's minus sign


@dataclass(frozen=True)
class Claim:
    """``text``: the report's sentence (or the part of it that carries the numbers) with ``{}``
    for each number; ``values(data)``: the numbers in order, computed from the archived files."""
    name: str
    text: str
    values: Callable[["StudyData"], Sequence[float]]


@dataclass(frozen=True)
class Fact:
    """A statement in words: ``text`` occurs in the report verbatim, and ``exceptions(data)``
    lists what contradicts it (empty when it holds)."""
    name: str
    text: str
    exceptions: Callable[["StudyData"], Sequence[str]]


@dataclass(frozen=True)
class ClaimFailure:
    name: str
    message: str


def number_pattern(text: str) -> re.Pattern:
    """The template's regular expression: its literal parts escaped, each ``{}`` a number."""
    pieces = text.split("{}")
    return re.compile(NUMBER.join(re.escape(p) for p in pieces))


def _flat(text: str) -> str:
    """Runs of whitespace as one space: a sentence may be wrapped anywhere in the report."""
    return " ".join(text.split())


def _parse(number: str) -> tuple[float, int]:
    """(value, decimals) of a printed number."""
    number = number.replace("−", "-")
    decimals = len(number.partition(".")[2])
    return float(number), decimals


def _agrees(printed: str, value: float) -> bool:
    x, decimals = _parse(printed)
    return not math.isnan(value) and abs(x - value) <= 0.5 * 10 ** -decimals + 1e-9


def check_claims(report: str, claims: Iterable[Claim | Fact], data: "StudyData") -> list[ClaimFailure]:
    """Every claim not found in ``report`` exactly once, or whose numbers disagree with the data."""
    failures = []
    report = _flat(report)
    for claim in claims:
        if isinstance(claim, Fact):
            count = report.count(_flat(claim.text))
            if count != 1:
                failures.append(ClaimFailure(claim.name, f"{claim.text!r} occurs {count} times in the report"))
                continue
            failures += [ClaimFailure(claim.name, f"{claim.text!r}: {e}") for e in claim.exceptions(data)]
            continue
        found = number_pattern(_flat(claim.text)).findall(report)
        if len(found) != 1:
            failures.append(ClaimFailure(claim.name, f"{claim.text!r} occurs {len(found)} times in the report"))
            continue
        printed = found[0] if isinstance(found[0], tuple) else (found[0],)
        values = [float(v) for v in claim.values(data)]
        if len(values) != len(printed):
            raise ValueError(f"claim {claim.name}: {len(printed)} numbers in the text, {len(values)} computed")
        wrong = [f"{p} (data: {v:.4g})" for p, v in zip(printed, values) if not _agrees(p, v)]
        if wrong:
            failures.append(ClaimFailure(claim.name, f"{claim.text!r}: printed {', '.join(wrong)}"))
    return failures


def markdown_rows(text: str) -> dict[str, list[str]]:
    """First cell -> the cells of a markdown table row in ``text`` (the first row with that cell)."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.setdefault(cells[0], cells)
    return rows


def paired_ratio_difference(a: Sequence[InContextResult], b: Sequence[InContextResult], *, metric: str = "cer",
                            n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> tuple[float, float, float]:
    """(ratio A − ratio B, CI low, CI high) of two systems' in-context ratios on the same recordings.

    ``a``, ``b``: one result per seed of each system; each ratio is Σ_seeds Σ_r whole / Σ_seeds Σ_r
    alone (`pooled_in_context`'s). Every draw resamples the recordings with replacement once and
    applies the draw to every seed of both systems (paired: a recording's counts of A and B stay
    together); the seeds are not resampled, so the CI is over the recordings for these trained
    models. An error when the results hold different recordings."""
    if not a or not b:
        raise ValueError("need at least one result per system")
    ids = [r.id for r in a[0].rows]
    if any([r.id for r in res.rows] != ids for res in (*a, *b)):
        raise ValueError("the two systems' results hold different recordings: no paired difference")
    counts_a = np.array([[r.counts(metric)[:2] for r in res.rows] for res in a], dtype=float).sum(axis=0)  # (R, 2)
    counts_b = np.array([[r.counts(metric)[:2] for r in res.rows] for res in b], dtype=float).sum(axis=0)
    point = counts_a[:, 0].sum() / counts_a[:, 1].sum() - counts_b[:, 0].sum() / counts_b[:, 1].sum()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ids), size=(n_boot, len(ids)))                  # (draws, R)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = (counts_a[idx, 0].sum(1) / counts_a[idx, 1].sum(1)
                - counts_b[idx, 0].sum(1) / counts_b[idx, 1].sum(1))
    boot = boot[np.isfinite(boot)]
    lo, hi = np.percentile(boot, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(point), float(lo), float(hi)


# word -> what a paired interval (A − B, lo, hi; lower is better for error rates and ratios) must
# show for "A is <word> than / like B"
COMPARATIVES: dict[str, Callable[[float, float], bool]] = {
    "worse": lambda lo, hi: lo > 0,             # A − B > 0 with its whole CI
    "degrades more": lambda lo, hi: lo > 0,
    "better": lambda lo, hi: hi < 0,
    "degrades less": lambda lo, hi: hi < 0,
    "like": lambda lo, hi: lo <= 0 <= hi,       # no difference the test audio can show
    "no better": lambda lo, hi: hi >= 0,        # B not shown worse than A
    "not more accurate": lambda lo, hi: hi >= 0,
}


def supports(word: str, interval: Sequence[float], what: str = "") -> list[str]:
    """[] when the paired interval (A − B, lo, hi) supports "A is <word> B" (`COMPARATIVES`), else
    one line saying why not. ``"best"``: pass one interval per rival, each must show A better."""
    if word == "best":
        return [e for iv in interval for e in supports("better", iv, what)]
    _, lo, hi = interval
    if COMPARATIVES[word](lo, hi):
        return []
    return [f"{what + ': ' if what else ''}'{word}' not supported by the paired interval "
            f"{interval[0]:+.3f} [{lo:+.3f}, {hi:+.3f}]"]


@dataclass
class StudyData:
    """Cached reads of a study's archived runs, addressed by run paths (``root/<folder>/<run>``)."""
    root: Path
    parts_path: Path | None = None
    n_boot: int = 1000
    ladder_composition: Path | None = None      # the ladder's composition file (or built folder)
    _cache: dict = field(default_factory=dict, repr=False)

    def paths(self, folder: str, pe: str, seeds: Iterable[int], head: str = "ctc") -> tuple[str, ...]:
        return tuple(str(self.root / folder / f"{pe}_{head}_s{s}") for s in seeds)

    def _memo(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def series(self, paths: Sequence[str], set_name: str, metric: str = "cer") -> LabelSeries:
        """The one label that ``paths`` hold in ``set_name`` (seeds pooled)."""
        def compute():
            labels = aggregate(load_runs(list(paths), set_name)[0], metric)
            if len(labels) != 1:
                raise ValueError(f"{paths} hold {len(labels)} labels in {set_name}, expected one")
            if len(labels[0].runs) != len(paths):
                raise ValueError(f"{set_name}: only {len(labels[0].runs)} of {len(paths)} runs have it")
            return labels[0]
        return self._memo(("series", tuple(paths), set_name, metric), compute)

    def value(self, paths: Sequence[str], set_name: str, bucket: str, metric: str = "cer") -> float:
        """Seed mean of ``metric`` (%) in ``bucket``."""
        return self.series(paths, set_name, metric).value[bucket]

    def per_seed(self, paths: Sequence[str], set_name: str, bucket: str, metric: str = "cer") -> list[float]:
        return list(self.series(paths, set_name, metric).per_seed[bucket])

    def buckets(self, paths: Sequence[str], set_name: str) -> list[str]:
        return [b for b in self.series(paths, set_name).buckets if b != ALL_LABEL]

    def parts(self) -> dict:
        return self._memo("parts", lambda: read_parts(self.parts_path))

    def in_context(self, paths: Sequence[str], long_set: str = "longform", alone_set: str = "test") -> LabelInContext:
        def compute():
            found = label_in_context(list(paths), long_set=long_set, alone_set=alone_set,
                                     parts_path=self.parts_path, n_boot=self.n_boot)
            if len(found) != 1 or len(next(iter(found.values())).runs) != len(paths):
                raise ValueError(f"{paths}: no in-context result for every run")
            return next(iter(found.values()))
        return self._memo(("in_context", tuple(paths), long_set, alone_set), compute)

    def ratio_ci(self, paths: Sequence[str], ref_bucket: str = "2-4", short_set: str = "test",
                 long_set: str = "longform") -> tuple[float, float, float]:
        """(ratio of seed means, CI low, CI high): the long set over the reference bucket, the CI
        resampling each recording together with the reference utterances inside it."""
        def compute():
            short, long = self.series(paths, short_set), self.series(paths, long_set)
            ci = ratio_ci(short, long, ref_bucket, LONG, n_boot=self.n_boot, parts=self.parts())
            if ci is None:
                raise ValueError(f"{paths}: no ratio CI (per-utterance scores missing)")
            return long.value[LONG] / short.value[ref_bucket], ci[0], ci[1]
        return self._memo(("ratio_ci", tuple(paths), ref_bucket, short_set, long_set), compute)

    def difference(self, a: Sequence[str], b: Sequence[str], set_name: str, bucket: str = LONG
                   ) -> tuple[float, float, float]:
        """(A − B in points, CI low, CI high), paired over utterances (`difference_ci`)."""
        def compute():
            sa, sb = self.series(a, set_name), self.series(b, set_name)
            lo, hi = (0.0, math.inf) if bucket == LONG else (sa.lo[bucket], sa.hi[bucket])
            d = difference_ci([r.run_dir / "eval" / r.test_set for r in sa.runs],
                              [r.run_dir / "eval" / r.test_set for r in sb.runs],
                              lo=lo, hi=hi, n_boot=self.n_boot)
            if d is None:
                raise ValueError(f"{a} vs {b}: no paired difference on {set_name}")
            return d
        return self._memo(("difference", tuple(a), tuple(b), set_name, bucket), compute)

    def attention(self, run: str, bucket: str, key: str = "local") -> float:
        """A run's attention statistic (``local``, ``distance_s``, ``distance_frac``) in ``bucket``."""
        stats = self._memo(("attention", run), lambda: read_attention_stats(Path(run)))
        return stats[bucket][key]

    def in_context_difference(self, a: Sequence[str], b: Sequence[str], long_set: str = "longform",
                              alone_set: str = "test") -> tuple[float, float, float]:
        """(in-context ratio A − B, CI low, CI high) on the long-form set: `paired_ratio_difference`
        of the two systems' per-seed results."""
        def compute():
            ra, rb = self.in_context(a, long_set, alone_set), self.in_context(b, long_set, alone_set)
            return paired_ratio_difference(ra.per_seed, rb.per_seed, n_boot=self.n_boot)
        return self._memo(("in_context_difference", tuple(a), tuple(b), long_set, alone_set), compute)

    # ------------------------------------------------------------------ the length ladder

    def ladder_index(self) -> Mapping:
        from asr_pe.data.synth.ladder import ladder_sets
        if self.ladder_composition is None:
            raise ValueError("StudyData(ladder_composition=...) is needed for ladder claims")
        return self._memo("ladder_index", lambda: ladder_sets(self.ladder_composition))

    def ladder_run(self, path: str, suffix: str = "", pool: str = "test") -> Mapping:
        """One run's (variant, rung) -> in-context result on the ladder's ``pool``."""
        from asr_pe.evaluation.ladder_report import run_ladder
        return self._memo(("ladder_run", path, suffix, pool),
                          lambda: run_ladder(path, self.ladder_index(), pool, suffix=suffix, n_boot=self.n_boot))

    def ladder(self, paths: Sequence[str], variant: str, rung: float, suffix: str = "",
               pool: str = "test") -> InContextResult:
        """The seeds of ``paths`` pooled at one rung (`pool_runs`: the dose-response tables' cell)."""
        from asr_pe.evaluation.ladder_report import pool_runs
        pooled = self._memo(("ladder", tuple(paths), suffix, pool), lambda: pool_runs(
            [self.ladder_run(p, suffix, pool) for p in paths], n_boot=self.n_boot))
        return pooled[(variant, float(rung))]

    def ladder_difference(self, a: Sequence[str], b: Sequence[str], variant: str, rung: float,
                          suffix_a: str = "", suffix_b: str = "") -> tuple[float, float, float]:
        """(in-context ratio A − B, CI low, CI high) at one rung of the test pool, paired over its
        recordings (`paired_ratio_difference`)."""
        key = (variant, float(rung))
        return self._memo(("ladder_difference", tuple(a), tuple(b), key, suffix_a, suffix_b),
                          lambda: paired_ratio_difference([self.ladder_run(p, suffix_a)[key] for p in a],
                                                          [self.ladder_run(p, suffix_b)[key] for p in b],
                                                          n_boot=self.n_boot))
