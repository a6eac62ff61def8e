"""The length study's lead table: the in-context ratio per PE (seeds pooled), from run directories.

For every run with both ``eval/<long set>/per_utt.jsonl`` (the long recordings decoded whole)
and ``eval/<alone set>/per_utt.jsonl`` (their source utterances decoded alone) and known parts
(`asr_pe.evaluation.in_context.parts_of_set`: a parts file given, or the manifest that
``buckets.meta.json`` names), `label_in_context` computes each seed's in-context ratio
(`in_context`, CI over recordings) and pools the seeds of a label (`pooled_in_context`: the ratio
Σ whole / Σ alone over seeds and recordings, CI from the crossed bootstrap: recordings x seeds).

`in_context_table` writes two markdown tables: per label, the recordings, the pooled CER of the
recordings decoded whole and of the same utterances alone, the in-context ratio with its
crossed 95 % CI (recordings x seeds), each seed's ratio with its CI over recordings, and (secondary) the old
cross-set ratio long set / reference bucket with a CI that resamples recordings together with
the reference utterances inside them (`length_ratio_ci` with ``parts``); then, per recording,
each label's ratio (seeds pooled), to show whether one recording carries the effect.

`in_context_overview` is the corpus recipes' table (stage 6, ``scripts/in_context_table.py --pair``):
one row per long-form set and label, against the set it was built from, the parts read from the
manifests the runs' results name.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Iterable

from asr_pe.errors import MissingFileError
from asr_pe.evaluation.in_context import (InContextResult, parts_of_set, pooled_in_context,
                                          set_in_context)
from asr_pe.evaluation.length_ratio import length_ratio_ci
from asr_pe.results_table import logical_path
from asr_pe.run_folder import PER_UTT, result_dir

from .wer_vs_length import RunResult, aggregate, check_one_run_per_seed, format_value, load_runs, seeds_cell

__all__ = ["LabelInContext", "label_in_context", "in_context_cell", "in_context_table", "in_context_overview",
           "OVERVIEW_KEYS"]

log = logging.getLogger(__name__)


@dataclass
class LabelInContext:
    """One label's runs (seeds), each seed's result and the seeds pooled."""
    label: str
    runs: list[RunResult]
    per_seed: list[InContextResult]
    pooled: InContextResult
    parts: dict


def label_in_context(paths: Iterable[str | os.PathLike], *, long_set: str, alone_set: str,
                     parts_path: str | os.PathLike | None = None, metric: str = "cer",
                     n_boot: int = 1000, seed: int = 0) -> dict[str, LabelInContext]:
    """label -> its in-context results, for the runs under ``paths`` that have what it needs
    (runs without per-utterance scores or known parts are left out, counted in one warning)."""
    runs, _ = load_runs(list(paths), long_set)
    grouped: dict[str, list[tuple[RunResult, InContextResult, dict]]] = {}
    skipped = []
    for r in runs:
        long_dir, alone_dir = result_dir(r.run_dir, long_set), result_dir(r.run_dir, alone_set)
        parts = parts_of_set(long_dir, parts_path)
        if parts is None or not (long_dir / PER_UTT).is_file() or not (alone_dir / PER_UTT).is_file():
            skipped.append(str(logical_path(r.run_dir)))
            continue
        res = set_in_context(long_dir, alone_dir, parts, metric=metric, n_boot=n_boot, seed=seed)
        grouped.setdefault(r.label, []).append((r, res, parts))
    if skipped:
        log.warning("%d run(s) lack per-utterance scores of %s/%s or the parts of %s; no in-context "
                    "ratio for them: %s", len(skipped), long_set, alone_set, long_set,
                    ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""))
    out = {}
    for label, items in grouped.items():
        check_one_run_per_seed(label, [i[0] for i in items])
        items.sort(key=lambda item: (str(item[0].seed), str(logical_path(item[0].run_dir))))
        out[label] = LabelInContext(label, [i[0] for i in items], [i[1] for i in items],
                                    pooled_in_context([i[1] for i in items], n_boot=n_boot, seed=seed),
                                    items[0][2])
    return out


def _ratio_text(ratio: float, lo: float, hi: float) -> str:
    if math.isnan(ratio):
        return "–"
    ci = "" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]"
    return f"{ratio:.2f}×{ci}"


def in_context_cell(item: LabelInContext | None) -> str:
    """``1.31× [1.12, 1.55]``: the pooled in-context ratio with its crossed CI (recordings x seeds); ``–`` without."""
    if item is None:
        return "–"
    p = item.pooled
    return _ratio_text(p.ratio, p.ci_low, p.ci_high)


def _cross_cell(short_runs: dict, item: LabelInContext, ref_bucket: str, metric: str, n_boot: int) -> str:
    """The cross-set ratio (long-set rate over the reference bucket's, seed means) with its
    overlap-aware CI; ``–`` where the short set lacks the bucket."""
    series = short_runs.get(item.label)
    if series is None or ref_bucket not in series.value or not series.value[ref_bucket]:
        return "–"
    long_rate = sum(r.whole for r in item.per_seed) / len(item.per_seed)
    ratio = long_rate / series.value[ref_bucket]
    by_dir = {r.run_dir: r for r in series.runs}
    pairs = [(by_dir[r.run_dir], r) for r in item.runs if r.run_dir in by_dir]
    ci = length_ratio_ci([result_dir(s.run_dir, s.test_set) for s, _ in pairs],
                         [result_dir(lr.run_dir, lr.test_set) for _, lr in pairs],
                         ref_lo=series.lo[ref_bucket], ref_hi=series.hi[ref_bucket], metric=metric,
                         n_boot=n_boot, parts=item.parts) if len(pairs) == len(item.runs) else None
    return _ratio_text(ratio, *(ci if ci else (math.nan, math.nan)))


def in_context_table(paths: Iterable[str | os.PathLike], *, long_set: str = "longform", alone_set: str = "test",
                     parts_path: str | os.PathLike | None = None, ref_bucket: str | None = "2-4",
                     metric: str = "cer", n_boot: int = 1000, seed: int = 0,
                     per_recording: bool = True) -> str:
    """The two markdown tables of the module docstring (the second with ``per_recording``);
    ``ref_bucket`` None leaves the cross-set column out."""
    paths = list(paths)
    results = label_in_context(paths, long_set=long_set, alone_set=alone_set, parts_path=parts_path,
                               metric=metric, n_boot=n_boot, seed=seed)
    if not results:
        raise MissingFileError(f"no run under the given paths has per-utterance scores of eval/{long_set} "
                                f"and eval/{alone_set} with known parts (pass the parts file)")
    short = {s.label: s for s in aggregate(load_runs(paths, alone_set)[0], metric)} if ref_bucket else {}
    m = metric.upper()
    durations = [r.duration for item in results.values() for r in item.pooled.rows]
    long_name = f"{round(sum(durations) / len(durations), -1):.0f} s" if durations else long_set
    head = ["PE", "seeds", "recordings", f"{m} whole", f"{m} alone",
            f"in-context ratio {long_name} [95 % CI: seeds, recordings]", "per seed [95 % CI: recordings]"]
    if ref_bucket:
        head.append(f"cross-set {long_name} / {ref_bucket} s [95 % CI, overlap-aware]")
    lines = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
    order = sorted(results, key=lambda lb: -results[lb].pooled.ratio if not math.isnan(results[lb].pooled.ratio)
                   else math.inf)
    for label in order:
        item = results[label]
        p = item.pooled
        row = [label.removesuffix("/ctc"), seeds_cell([r.seed for r in item.runs]), str(len(p.rows)),
               format_value(p.whole, 2), format_value(p.alone, 2), in_context_cell(item),
               "; ".join(_ratio_text(r.ratio, r.ci_low, r.ci_high) for r in item.per_seed)]
        if ref_bucket:
            row.append(_cross_cell(short, item, ref_bucket, metric, n_boot))
        lines.append("| " + " | ".join(row) + " |")
    text = "\n".join(lines) + "\n"
    if per_recording:
        first = results[order[0]].pooled.rows
        head = ["recording", "s", "parts"] + [label.removesuffix("/ctc") for label in order]
        rec = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
        by_label = {label: {r.id: r for r in results[label].pooled.rows} for label in order}
        for r in first:
            cells = [r.id, f"{r.duration:.0f}", str(r.parts)]
            for label in order:
                row = by_label[label].get(r.id)
                cells.append("–" if row is None or math.isnan(row.ratio(metric)) else f"{row.ratio(metric):.2f}")
            rec.append("| " + " | ".join(cells) + " |")
        text += "\n" + "\n".join(rec) + "\n"
    return text


OVERVIEW_KEYS = ("long_set", "alone_set", "label", "seeds", "recordings", "mean_duration", "whole", "alone",
                 "ratio", "ci_low", "ci_high")


def in_context_overview(paths: Iterable[str | os.PathLike], pairs: Iterable[tuple[str, str]], *,
                        metric: str = "wer", n_boot: int = 1000, seed: int = 0) -> tuple[str, list[dict]]:
    """One table for a corpus recipe: per long-form set (decoded whole) and label, the in-context
    ratio against the set it was built from (decoded alone), seeds pooled, with its 95 % CI.

    ``pairs``: (long set, the set holding its parts); the parts come from the manifest each run's
    ``eval/<long set>/buckets.meta.json`` names. A pair that no run has both sets of is a row of
    ``–`` saying so (a figure stage reports what exists instead of failing). Returns (markdown,
    rows with `OVERVIEW_KEYS`)."""
    paths = list(paths)
    m = metric.upper()
    lines = ["| long-form set | decoded alone | PE | seeds | recordings | mean s | "
             f"{m} whole | {m} alone | in-context ratio [95 % CI] |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    rows: list[dict] = []
    for long_set, alone_set in pairs:
        try:
            results = label_in_context(paths, long_set=long_set, alone_set=alone_set, metric=metric,
                                       n_boot=n_boot, seed=seed)
        except (MissingFileError, ValueError) as e:   # no run has the long set (RunDirError is a ValueError)
            log.warning("%s: no in-context ratio (%s)", long_set, e)
            results = {}
        if not results:
            lines.append(f"| {long_set} | {alone_set} | – | – | 0 | – | – | – | – (no run has both sets evaluated "
                         f"with the long set's parts known) |")
            continue
        for label, item in results.items():
            p = item.pooled
            mean_s = sum(r.duration for r in p.rows) / len(p.rows)
            lines.append(f"| {long_set} | {alone_set} | {label.removesuffix('/ctc')} | "
                         f"{seeds_cell([r.seed for r in item.runs])} | {len(p.rows)} | {mean_s:.0f} | "
                         f"{format_value(p.whole, 2)} | {format_value(p.alone, 2)} | {in_context_cell(item)} |")
            rows.append({"long_set": long_set, "alone_set": alone_set, "label": label,
                         "seeds": " ".join(str(r.seed) for r in item.runs), "recordings": len(p.rows),
                         "mean_duration": mean_s, "whole": p.whole, "alone": p.alone, "ratio": p.ratio,
                         "ci_low": p.ci_low, "ci_high": p.ci_high})
    return "\n".join(lines) + "\n", rows
