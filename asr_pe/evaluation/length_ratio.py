"""Bootstrap confidence interval of a length-degradation ratio.

The study's degradation ratio is a long set's error rate over a reference bucket's of the short
set (e.g. CER at 160 s over CER at 2-4 s), both pooled over utterances and averaged over seeds.
Its uncertainty comes from which test utterances were drawn, in both sets: a ratio of the two
CERs' CI bounds is no CI of the ratio (the bounds are not attained together), and two seeds'
ratios are a seed spread, not a CI. This module resamples utterances instead:

    for each of n_boot draws:
        short draw: n_short utterances of the reference bucket, with replacement
        long draw:  n_long utterances of the long set (or bucket), with replacement
        ratio_b = mean over seeds of Σerr/Σref (long draw) / mean over seeds of Σerr/Σref (short draw)
    CI = percentiles of ratio_b

Seeds of one model are scored on the same utterances, so one draw of utterance indices is
applied to every seed (paired across seeds); where the seeds' utterance ids differ, each seed is
drawn on its own. Without ``parts`` the two sets are drawn independently of each other, which is
right only when they share no utterance.

A long-form set built from the short set shares its utterances (the synthetic study's 160 s
recordings hold 21 of the 25 utterances of the 2-4 s bucket): then the two rates are not
independent and the draws must keep them together. With ``parts`` (recording id -> its source
utterance ids) the resampling unit is a *cluster*: a long recording together with the reference
bucket's utterances inside it (recordings sharing an utterance are one cluster), and each
reference utterance inside no recording is a cluster of its own. A draw resamples clusters with
replacement (one draw for every seed) and takes both rates from the same draw. Where a
recording's errors follow those of its parts, the ratio then varies less than two independent
draws would say; where they do not, the clusters say so too.

This ratio still divides rates measured on different content; the in-context ratio
(`asr_pe.evaluation.in_context`) holds the content fixed and leads the study's tables.

`difference_ci` is the paired companion for two models scored on the same utterances: the CI
of (seed mean of A's rate) − (seed mean of B's rate) with one draw of utterance indices applied
to every seed of both, so that what the two models share (which utterances are hard) cancels.

Reads each eval set's ``per_utt.jsonl`` (written by `evaluate.py`: ``duration``, ``errors``,
``ref_words``, ``char_errors``, ``ref_chars`` per utterance). Knows nothing of plotting.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from asr_pe.evaluation.buckets import percentile_ci
from asr_pe.evaluation.in_context import METRICS, check_metric
from asr_pe.io import read_jsonl
from asr_pe.results_table import locate
from asr_pe.run_folder import PER_UTT

__all__ = ["PER_UTT", "read_errors", "length_ratio_ci", "difference_ci"]

_MAX_ELEMENTS = 2_000_000   # draws x utterances per chunk of the bootstrap


def read_errors(set_dir: str | os.PathLike, *, metric: str = "cer", lo: float = 0.0,
                hi: float = math.inf) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """(ids, errors, reference lengths) of the utterances of ``set_dir/per_utt.jsonl`` with
    ``lo <= duration < hi``, sorted by id; None when the file is absent (e.g. an archived
    remedy folder, which keeps bucket tables only). A malformed line is an error naming the
    file and line."""
    check_metric(metric)
    path = locate(Path(set_dir) / PER_UTT)
    if not path.is_file():
        return None
    err_key, ref_key = METRICS[metric]
    rows = []
    for lineno, rec in read_jsonl(path):
        try:
            duration = float(rec["duration"])
            if lo <= duration < hi:
                rows.append((str(rec["id"]), float(rec[err_key]), float(rec[ref_key])))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{lineno}: not a per-utterance record with duration, id, "
                             f"{err_key} and {ref_key} ({e})") from None
    rows.sort()
    return ([r[0] for r in rows], np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))


def _draws(n: int, n_boot: int, rng: np.random.Generator) -> list[np.ndarray]:
    """n_boot resamples of n utterance indices, in (draws, n) chunks of bounded size."""
    return [rng.integers(0, n, size=(stop - start, n)) for start, stop in _chunks(n_boot, n)]


def _rates_on(sets: Sequence[tuple[list[str], np.ndarray, np.ndarray]], draws: list[np.ndarray]) -> np.ndarray:
    """(draws,) mean over seeds of Σerrors/Σref on the given index draws (nan where Σref = 0)."""
    total = 0.0
    for _, err, ref in sets:
        e = np.concatenate([err[idx].sum(axis=1) for idx in draws])
        r = np.concatenate([ref[idx].sum(axis=1) for idx in draws])
        with np.errstate(divide="ignore", invalid="ignore"):
            total = total + np.where(r > 0, e / r, np.nan)
    return total / len(sets)


def _seed_rates(sets: Sequence[tuple[list[str], np.ndarray, np.ndarray]], n_boot: int,
                rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) mean over seeds of Σerrors/Σref on resampled utterances: one draw for every
    seed where they score the same utterances, a draw per seed otherwise."""
    if all(ids == sets[0][0] for ids, _, _ in sets):
        return _rates_on(sets, _draws(len(sets[0][0]), n_boot, rng))
    return sum(_rates_on([s], _draws(len(s[0]), n_boot, rng)) for s in sets) / len(sets)


def _chunks(n_boot: int, n: int):
    step = max(1, _MAX_ELEMENTS // max(n, 1))
    return [(start, min(n_boot, start + step)) for start in range(0, n_boot, step)]


def _clusters(short_ids: list[str], long_ids: list[str], parts: Mapping[str, Sequence[str]]
              ) -> tuple[np.ndarray, np.ndarray, int]:
    """Cluster index of each short utterance and of each long recording (see the module
    docstring): connected components of 'recording holds utterance', by union-find."""
    parent = list(range(len(short_ids) + len(long_ids)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    where = {u: i for i, u in enumerate(short_ids)}
    for k, rid in enumerate(long_ids):
        for source in parts.get(rid, ()):
            if source in where:
                a, b = find(len(short_ids) + k), find(where[source])
                parent[a] = b
    roots = [find(i) for i in range(len(parent))]
    index = {r: c for c, r in enumerate(dict.fromkeys(roots))}
    cluster = np.array([index[r] for r in roots])
    return cluster[:len(short_ids)], cluster[len(short_ids):], len(index)


def _clustered_ratio(shorts, longs, parts, n_boot: int, rng: np.random.Generator, ci: float
                     ) -> tuple[float, float] | None:
    if any(s[0] != shorts[0][0] for s in shorts) or any(s[0] != longs[0][0] for s in longs):
        return None                         # seeds scored on different utterances: no common clusters
    short_c, long_c, n_clusters = _clusters(shorts[0][0], longs[0][0], parts)

    def per_cluster(sets, of):                                     # (seeds, clusters) sums
        return (np.stack([np.bincount(of, weights=err, minlength=n_clusters) for _, err, _ in sets]),
                np.stack([np.bincount(of, weights=ref, minlength=n_clusters) for _, _, ref in sets]))

    s_err, s_ref = per_cluster(shorts, short_c)
    l_err, l_ref = per_cluster(longs, long_c)
    ratios = []
    for start, stop in _chunks(n_boot, n_clusters):
        idx = rng.integers(0, n_clusters, size=(stop - start, n_clusters))       # (draws, clusters)
        with np.errstate(divide="ignore", invalid="ignore"):
            short_rate = (s_err[:, idx].sum(axis=2) / s_ref[:, idx].sum(axis=2)).mean(axis=0)   # (draws,)
            long_rate = (l_err[:, idx].sum(axis=2) / l_ref[:, idx].sum(axis=2)).mean(axis=0)
            ratios.append(long_rate / short_rate)
    ratio = np.concatenate(ratios)
    ratio = ratio[np.isfinite(ratio)]
    return percentile_ci(ratio, ci) if ratio.size else None


def length_ratio_ci(short_sets: Sequence[str | os.PathLike], long_sets: Sequence[str | os.PathLike], *,
                    ref_lo: float, ref_hi: float, long_lo: float = 0.0, long_hi: float = math.inf,
                    metric: str = "cer", n_boot: int = 1000, seed: int = 0, ci: float = 0.95,
                    parts: Mapping[str, Sequence[str]] | None = None) -> tuple[float, float] | None:
    """Percentile-bootstrap CI of (seed mean of the long set's rate) / (seed mean of the
    reference bucket's rate). ``short_sets[i]`` and ``long_sets[i]`` are one seed's eval set
    folders (``run/eval/test``, ``run/eval/longform``); the reference bucket is
    ``ref_lo <= duration < ref_hi`` of the short set, the long one ``long_lo <= duration < long_hi``
    (default: all) of the long set. ``parts`` (long recording id -> source utterance ids): the
    draws resample recordings together with the reference utterances inside them (see the module
    docstring), so a long set built from the short set is not drawn as if it were independent.
    None when a folder has no ``per_utt.jsonl``, a selection is empty, no draw has a positive
    reference rate, or (with ``parts``) the seeds were scored on different utterances."""
    if len(short_sets) != len(long_sets) or not short_sets:
        raise ValueError(f"need one short and one long set per seed, got {len(short_sets)} and {len(long_sets)}")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    shorts = [read_errors(d, metric=metric, lo=ref_lo, hi=ref_hi) for d in short_sets]
    longs = [read_errors(d, metric=metric, lo=long_lo, hi=long_hi) for d in long_sets]
    if any(s is None or not s[0] for s in shorts + longs):
        return None
    rng = np.random.default_rng(seed)
    if parts is not None:
        return _clustered_ratio(shorts, longs, parts, n_boot, rng, ci)
    short_rate = _seed_rates(shorts, n_boot, rng)
    long_rate = _seed_rates(longs, n_boot, rng)
    ok = np.isfinite(long_rate) & (short_rate > 0)
    return percentile_ci(long_rate[ok] / short_rate[ok], ci) if ok.any() else None


def difference_ci(a_sets: Sequence[str | os.PathLike], b_sets: Sequence[str | os.PathLike], *,
                  lo: float = 0.0, hi: float = math.inf, metric: str = "cer", n_boot: int = 1000,
                  seed: int = 0, ci: float = 0.95) -> tuple[float, float, float] | None:
    """(difference, CI low, CI high), in points (× 100), of model A's seed-mean rate minus model
    B's on the utterances with ``lo <= duration < hi``; ``a_sets`` / ``b_sets`` are each seed's
    eval set folder of A / B (any number of seeds each). Every draw resamples utterance indices
    once and applies them to every seed of both models (a paired bootstrap). None when a folder
    has no ``per_utt.jsonl``, the selection is empty, or the folders hold different utterances
    (no pairing is possible)."""
    if not a_sets or not b_sets:
        raise ValueError(f"need at least one eval set per model, got {len(a_sets)} and {len(b_sets)}")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    a = [read_errors(d, metric=metric, lo=lo, hi=hi) for d in a_sets]
    b = [read_errors(d, metric=metric, lo=lo, hi=hi) for d in b_sets]
    if any(s is None or not s[0] for s in a + b) or any(s[0] != a[0][0] for s in a + b):
        return None
    n = len(a[0][0])
    draws = [np.arange(n)[None]] + _draws(n, n_boot, np.random.default_rng(seed))  # the point, then the resamples
    d = 100 * (_rates_on(a, draws) - _rates_on(b, draws))              # (1 + n_boot,) points
    boot = d[1:][np.isfinite(d[1:])]
    if not np.isfinite(d[0]) or not boot.size:
        return None
    return (float(d[0]), *percentile_ci(boot, ci))
