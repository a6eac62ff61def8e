"""Dose-response of length from a run's evaluation on the length ladder (`asr_pe.data.synth.ladder`).

A ladder pool (``dev`` or ``test``) has an ``alone`` set (its utterances, decoded one by one) and,
per join variant (``gap500ms``, ``nogap``) and rung (5 ... 160 s), a set of recordings made of
those same utterances. `run_ladder` reads a run's ``eval/<set><suffix>/per_utt.jsonl`` of every
set of a pool and gives, per (variant, rung), the in-context ratio
(`asr_pe.evaluation.in_context.in_context`: the recordings decoded whole over the same utterances
decoded alone) with its CI over recordings; `pool_runs` pools seeds (crossed CI: recordings x seeds);
`dose_response_table` prints one pool's curve; `choose_on_dev` picks an inference setting on the
dev pool, so that the test pool is decoded once with the setting chosen (choices on dev, numbers
on test).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from asr_pe.evaluation.in_context import InContextResult, in_context, pooled_in_context, read_parts, read_records
from asr_pe.results_table import locate
from asr_pe.run_folder import PER_UTT, result_dir

__all__ = ["pool_sets", "run_ladder", "pool_runs", "dose_response_table", "choose_on_dev", "whole_rate"]

Key = tuple[str, float]          # (variant, rung seconds)


def pool_sets(index: Mapping[str, Any], pool: str) -> tuple[str, dict[Key, str]]:
    """(alone manifest, {(variant, rung): recordings manifest}) of ``pool`` in a ladder index
    (`asr_pe.data.synth.ladder.ladder_sets`)."""
    if pool not in index["sets"]:
        raise KeyError(f"the ladder has no pool {pool!r} (it has {sorted(index['sets'])})")
    entry = index["sets"][pool]
    return entry["alone"], {(variant, float(rung)): path for variant, rungs in entry["recordings"].items()
                            for rung, path in rungs.items()}


def run_ladder(run_dir: str | Path, index: Mapping[str, Any], pool: str, *, suffix: str = "",
               metric: str = "cer", n_boot: int = 1000, seed: int = 0) -> dict[Key, InContextResult]:
    """Per (variant, rung): the in-context result of one run decoded with ``suffix`` (an inference
    setting's result folders, ``eval/<set><suffix>``). The alone decodings are those with the same
    suffix where the run has them, else the plain ones."""
    run_dir = locate(Path(run_dir))              # an archived run: its folder written out from the table
    alone, sets = pool_sets(index, pool)
    alone_dir = result_dir(run_dir, Path(alone).stem, suffix)
    if not (alone_dir / PER_UTT).is_file():
        alone_dir = result_dir(run_dir, Path(alone).stem)
    alone_records = read_records(alone_dir / PER_UTT)     # read once: every set of the pool is made of them
    return {key: in_context(read_records(result_dir(run_dir, Path(path).stem, suffix) / PER_UTT), read_parts(path),
                            alone_records, metric=metric, n_boot=n_boot, seed=seed)
            for key, path in sorted(sets.items())}


def pool_runs(per_run: Sequence[Mapping[Key, InContextResult]], *, n_boot: int = 1000,
              seed: int = 0) -> dict[Key, InContextResult]:
    """Seeds of one system pooled per (variant, rung): `pooled_in_context` (crossed CI: recordings x seeds)."""
    keys = sorted(set.intersection(*(set(r) for r in per_run))) if per_run else []
    return {key: pooled_in_context([r[key] for r in per_run], n_boot=n_boot, seed=seed) for key in keys}


def whole_rate(results: Mapping[Key, InContextResult], *, variant: str, min_rung: float = 0.0) -> float:
    """Pooled rate (%) of the recordings decoded whole over the rungs >= ``min_rung`` of ``variant``."""
    rows = [row for (v, rung), res in results.items() if v == variant and rung >= min_rung for row in res.rows]
    if not rows:
        return math.nan
    metric = next(iter(results.values())).metric
    errors = sum(r.counts(metric)[0] for r in rows)
    ref = sum(r.counts(metric)[2] for r in rows)
    return 100 * errors / ref if ref else math.nan


def choose_on_dev(candidates: Mapping[str, Mapping[Key, InContextResult]], *, variant: str,
                  min_rung: float = 0.0) -> tuple[str, dict[str, float]]:
    """The candidate (an inference setting's name; ``""`` the plain decoding) whose dev recordings
    of ``variant`` and rungs >= ``min_rung``, decoded whole, have the lowest pooled rate; returns
    (its name, every candidate's rate). Ties go to the first candidate in the given order."""
    rates = {name: whole_rate(res, variant=variant, min_rung=min_rung) for name, res in candidates.items()}
    finite = [name for name in candidates if not math.isnan(rates[name])]
    if not finite:
        raise ValueError(f"no candidate has dev results for variant {variant!r} at rungs >= {min_rung:g} s")
    return min(finite, key=lambda name: rates[name]), rates


def _ratio(res: InContextResult) -> str:
    if math.isnan(res.ratio):
        return "–"
    return f"{res.ratio:.2f}×" + ("" if math.isnan(res.ci_low) else f" [{res.ci_low:.2f}, {res.ci_high:.2f}]")


def dose_response_table(results: Mapping[Key, InContextResult]) -> str:
    """Markdown: one row per rung; per variant the recordings, the rate decoded whole, the rate of
    the same utterances alone and the in-context ratio with its CI."""
    variants = sorted({v for v, _ in results})
    rungs = sorted({r for _, r in results})
    m = next(iter(results.values())).metric.upper() if results else "CER"
    head = ["rung (s of speech)"]
    for v in variants:
        head += [f"{v}: recordings", f"{v}: {m} whole", f"{v}: {m} alone", f"{v}: in-context ratio [95 % CI]"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for rung in rungs:
        row = [f"{rung:g}"]
        for v in variants:
            res = results.get((v, rung))
            row += (["–"] * 4 if res is None else
                    [str(len(res.rows)), f"{res.whole:.2f}", f"{res.alone:.2f}", _ratio(res)])
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
