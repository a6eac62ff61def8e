"""Attention statistics per duration bucket of a run's test sets (``scripts/attention_vs_length.py``).

For each test set, the first ``per_bucket`` utterances (manifest order) of every duration bucket
(the run's ``eval.edges``, resolved as evaluation resolves them) are encoded one at a time; each
layer's attention weights are summarised per head by `asr_pe.evaluation.attention_stats`. The
rows go to ``attention_stats.csv`` (one per utterance, layer and head) and
``attention_stats.md`` (head and utterance means per bucket and layer, one table per statistic).

Loading the run and encoding an utterance are the caller's (``attend``): this layer knows no
training code.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from asr_pe.data.manifest import Utterance, read_manifest
from asr_pe.evaluation.attention_stats import STAT_KEYS, attention_stats
from asr_pe.evaluation.buckets import bucket_label, resolve_edges
from asr_pe.io import atomic_write_text

__all__ = ["CSV_KEYS", "TITLES", "first_per_bucket", "collect_rows", "csv_text", "markdown", "write_report"]

CSV_KEYS = ("test_set", "bucket", "utt", "duration", "frames", "layer", "head", *STAT_KEYS)
TITLES = {"mean_distance_s": "mean attended distance (s)",
          "norm_entropy": "attention entropy / ln T (0 = one frame, 1 = uniform)",
          "local_mass": "share of attention within ±local_s",
          "entropy": "attention entropy (nats)"}

# utt -> (seconds of it that were encoded, per-layer attention weights [(1, H, T, T)])
Attend = Callable[[Utterance], tuple[float, Sequence[torch.Tensor]]]


def first_per_bucket(utts: list, edges: list[float], n: int) -> dict[str, list]:
    """The first ``n`` utterances (manifest order) of each [lo, hi) duration bucket, in bucket order;
    durations past the last edge share one open bucket."""
    bounds = sorted(float(e) for e in edges)
    bounds = ([0.0] if bounds[0] > 0 else []) + bounds + [math.inf]
    picked: dict[str, list] = {bucket_label(lo, hi): [] for lo, hi in zip(bounds, bounds[1:])}
    for u in utts:
        k = bisect.bisect_right(bounds, u.duration) - 1
        label = bucket_label(bounds[k], bounds[k + 1])
        if len(picked[label]) < n:
            picked[label].append(u)
    return {label: us for label, us in picked.items() if us}


def collect_rows(sets: Mapping[str, str | Path], edges_spec, per_bucket: int, attend: Attend,
                 frame_shift_s: float, local_s: float) -> tuple[list[dict], int]:
    """-> (rows with `CSV_KEYS`, number of layers) for test sets ``{name: manifest}``.

    ``edges_spec`` is ``eval.edges`` ("doubling" or a list), resolved per set over its
    durations; each picked utterance goes through ``attend`` and is printed as it is done.
    """
    rows: list[dict] = []
    n_layers = 0
    for name, manifest in sets.items():
        utts = read_manifest(manifest)
        edges = resolve_edges(edges_spec, [u.duration for u in utts])  # the buckets evaluate.py uses
        for label, bucket_utts in first_per_bucket(utts, edges, per_bucket).items():
            for utt in bucket_utts:
                duration, attn = attend(utt)
                n_layers = len(attn)
                for layer, w in enumerate(attn):
                    stats = attention_stats(w[0].float(), frame_shift_s, local_s)  # w: (1, H, T, T)
                    for head in range(w.size(1)):
                        rows.append({"test_set": name, "bucket": label, "utt": utt.id,
                                     "duration": round(duration, 3), "frames": w.size(-1), "layer": layer,
                                     "head": head, **{k: float(stats[k][head]) for k in STAT_KEYS}})
                print(f"{name} {label}: {utt.id} ({duration:.1f} s, {attn[0].size(-1)} frames)", flush=True)
    return rows, n_layers


def csv_text(rows: list[dict]) -> str:
    """The CSV (`CSV_KEYS`; finite floats with 6 significant digits)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_KEYS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) and math.isfinite(r[k]) else r[k])
                         for k in CSV_KEYS})
    return buf.getvalue()


BOOTSTRAP_DRAWS = 2000


def utterance_ci(rows: list[dict], key: str, draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of a bucket's mean ``key``, resampling its utterances
    (each utterance's value: the mean over its layers and heads, so every utterance weighs the
    same); one model, so it says nothing of seeds. (nan, nan) for fewer than 2 utterances."""
    per_utt: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        per_utt[r["utt"]].append(r[key])
    values = np.array([np.mean(v) for v in per_utt.values()])
    if len(values) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(draws, len(values)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def markdown(rows: list[dict], title: str, n_layers: int, local_s: float) -> str:
    """Per statistic: rows (set, bucket), columns layers + their mean with a 95 % CI over the
    bucket's utterances; cells are head+utterance means."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["test_set"], r["bucket"])].append(r)
    out = [f"# Attention vs input length — {title}", "",
           "Each cell: mean over the bucket's utterances and the layer's heads "
           "(`scripts/attention_vs_length.py`; `asr_pe/evaluation/attention_stats.py` defines the "
           f"statistics; local_s = {local_s:g} s). *all*: the mean over layers, and its 95 % CI "
           f"resampling the bucket's utterances (percentile bootstrap, {BOOTSTRAP_DRAWS} draws; "
           "one model: no seed variation).", ""]
    for key in ("mean_distance_s", "norm_entropy", "local_mass"):
        out += [f"## {TITLES[key]}", "",
                "| set | bucket (s) | utts | mean dur (s) | " + " | ".join(f"layer {k}" for k in range(n_layers))
                + " | all | 95 % CI (utterances) |", "| --- | --- | ---: | ---: |" + " ---: |" * (n_layers + 2)]
        for (test_set, bucket), rs in groups.items():
            utts = {r["utt"]: r["duration"] for r in rs}
            per_layer = [np.mean([r[key] for r in rs if r["layer"] == k]) for k in range(n_layers)]
            fmt = "{:.3f}" if key != "mean_distance_s" else "{:.2f}"
            lo, hi = utterance_ci(rs, key)
            cells = [fmt.format(v) for v in (*per_layer, float(np.mean(per_layer)))]
            cells.append("-" if math.isnan(lo) else f"[{fmt.format(lo)}, {fmt.format(hi)}]")
            out.append(f"| {test_set} | {bucket} | {len(utts)} | {np.mean(list(utts.values())):.1f} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def write_report(rows: list[dict], out: str | Path, title: str, n_layers: int, local_s: float) -> tuple[Path, str]:
    """Write ``<out>/attention_stats.csv`` and ``.md`` (atomically) -> (CSV path, markdown text)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "attention_stats.csv", csv_text(rows))
    md = markdown(rows, title, n_layers, local_s)
    atomic_write_text(out / "attention_stats.md", md)
    return out / "attention_stats.csv", md
