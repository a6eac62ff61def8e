"""Duration buckets: pooled WER/CER per bucket with percentile-bootstrap confidence intervals.

Pooling: a bucket's WER is Σ errors / Σ reference words over its utterances (in %), not the
mean of per-utterance WERs, which would over-weight short utterances.

Bootstrap: utterances are resampled with replacement inside each bucket (``n_boot`` draws,
vectorised); each draw gives a pooled WER and a pooled CER from the *same* resample; the
interval is the (1-ci)/2 and (1+ci)/2 percentiles. Each bucket gets its own numpy Generator
seeded from ``(seed, crc32(label))``, so a bucket's interval does not change when other buckets
are added or removed. Draws whose resample holds no reference words (possible only when
some references are empty) are left out of the percentiles.

Buckets: ``edges`` are increasing bucket boundaries in seconds; bucket k is [edges[k], edges[k+1]).
An utterance at or beyond the last edge goes into an open last bucket labelled ``"<last>+"``;
when ``edges[0] > 0`` a bucket [0, edges[0]) is prepended, so no utterance is dropped.
Empty buckets are omitted from `bucket_table` (they have no WER); `bucketize` returns them all.

The edge scheme used everywhere (``eval.edges: doubling``, `DEFAULT_EDGES`) is ``doubling``:
0, 2, 4, 8, ... s, doubled until the last edge exceeds the longest utterance of the test set
(`doubling_edges`), so every duration, up to whole talks of 10-20 minutes, gets a closed bucket
of its own (a 160 s set lands in 128-256, a 20-minute talk in 1024-2048) and the open bucket
stays empty. Because empty buckets are omitted, the rows do not depend on where the doubling
stops: they equal those of any longer doubling list (e.g. [0, 2, ..., 256] on the synth study).
An explicit list of edges is still accepted (`resolve_edges`).

A second scheme, ``step:<s>`` (`step_edges`), is the CAPE paper's natural-length binning: fixed
bins of ``s`` seconds (0-5, 5-10, 15-20, ... with ``step:5``) up past the longest utterance, as
the authors' per-bin test lists (``tl_test_15-20s.lst`` ...) were cut from the duration column.
`asr_pe.plots.natural_bins` draws it from the per-utterance results the evaluation already wrote
(no decoding again); ``eval.edges=step:5`` writes it into ``buckets.csv`` too.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from asr_pe.errors import UserError
from asr_pe.io import atomic_write_text, read_jsonl
from asr_pe.run_folder import BUCKETS_CSV, BUCKETS_MD, BUCKETS_META

__all__ = [
    "DEFAULT_EDGES", "DOUBLING", "FIRST_DOUBLING_EDGE", "doubling_edges", "resolve_edges", "describe_edges",
    "STEP", "NATURAL_BIN_S", "step_edges",
    "RECORD_KEYS", "ROW_KEYS", "Bucket", "bucket_label", "bucketize",
    "bootstrap_ratio_ci", "percentile_ci", "bucket_table", "format_table", "write_bucket_files",
    "read_bucket_csv", "write_per_utt", "read_per_utt", "PerUttError", "atomic_write_text",
    "ALL_LABEL",
]

DOUBLING = "doubling"             # edges 0, 2, 4, 8, ... up past the longest utterance
FIRST_DOUBLING_EDGE = 2.0         # seconds: the first doubling bucket is [0, 2)
DEFAULT_EDGES: str = DOUBLING
STEP = "step"                     # "step:<s>": fixed bins of s seconds up past the longest utterance
NATURAL_BIN_S = 5.0               # the CAPE paper's natural-length bins: 0-5, 5-10, ... s
RECORD_KEYS = ("id", "duration", "errors", "ref_words", "sub", "del", "ins",
               "char_errors", "ref_chars")
ROW_KEYS = ("bucket", "lo", "hi", "utterances", "mean_duration", "ref_words", "errors",
            "sub", "del", "ins", "wer", "wer_ci_low", "wer_ci_high", "ref_chars",
            "char_errors", "cer", "cer_ci_low", "cer_ci_high")
_INT_KEYS = {"utterances", "ref_words", "errors", "sub", "del", "ins", "ref_chars", "char_errors"}
ALL_LABEL = "all"
# Bootstrap draws are processed in chunks so that the (draws, n) index matrix stays below this.
_MAX_BOOT_ELEMENTS = 4_000_000


class PerUttError(UserError, ValueError):
    """A bad ``per_utt.jsonl`` line; the message is ``<path>:<line>: <reason>``."""


def bucket_label(lo: float, hi: float) -> str:
    """``"0-2"`` for [0, 2), ``"64+"`` for the open bucket [64, inf)."""
    return f"{lo:g}+" if math.isinf(hi) else f"{lo:g}-{hi:g}"


@dataclass
class Bucket:
    label: str
    lo: float
    hi: float                      # math.inf for the open last bucket
    records: list = field(default_factory=list)


def _check_edges(edges: Sequence[float]) -> list[float]:
    edges = [float(e) for e in edges]
    if not edges:
        raise ValueError("bucket edges must not be empty")
    if edges[0] < 0 or any(math.isinf(e) or math.isnan(e) for e in edges):
        raise ValueError(f"bucket edges must be finite and >= 0, got {edges}")
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"bucket edges must be strictly increasing, got {edges}")
    if edges[0] > 0:
        edges = [0.0] + edges
    return edges


def _check_width(max_duration: float, width: float, what: str) -> tuple[float, float]:
    max_duration, width = float(max_duration), float(width)
    if not math.isfinite(max_duration) or max_duration < 0:
        raise ValueError(f"max_duration must be finite and >= 0, got {max_duration!r}")
    if not width > 0 or math.isinf(width):
        raise ValueError(f"{what} must be finite and > 0, got {width!r}")
    return max_duration, width


def doubling_edges(max_duration: float, first: float = FIRST_DOUBLING_EDGE) -> list[float]:
    """[0, first, 2·first, 4·first, ...] up to the first edge > ``max_duration`` (at least [0, first]).

    The last edge is strictly greater than the longest utterance, so the open bucket past it
    is always empty: ``doubling_edges(160) == [0, 2, 4, ..., 128, 256]``."""
    max_duration, first = _check_width(max_duration, first, "the first doubling edge")
    edges = [0.0, first]
    while edges[-1] <= max_duration:
        edges.append(2 * edges[-1])
    return edges


def step_edges(max_duration: float, step: float = NATURAL_BIN_S) -> list[float]:
    """[0, step, 2·step, ...] up to the first edge > ``max_duration`` (at least [0, step]): the
    CAPE paper's natural-length bins with ``step=5``; ``step_edges(34.9) == [0, 5, ..., 35]``,
    ``step_edges(35.0)`` ends at 40 (an utterance of exactly 35 s is in [35, 40))."""
    max_duration, step = _check_width(max_duration, step, "the bin width")
    n = int(math.floor(max_duration / step)) + 1   # bins [k·step, (k+1)·step), k = 0 .. n-1
    return [k * step for k in range(n + 1)]


def _scheme_error(edges) -> ValueError:
    return ValueError(f"bucket edges must be {DOUBLING!r}, '{STEP}:<seconds>' or a list of seconds, got {edges!r}")


def resolve_edges(edges: Sequence[float] | str, durations: Iterable[float]) -> list[float]:
    """Bucket edges for a test set: ``"doubling"`` -> `doubling_edges` of its longest utterance;
    ``"step:5"`` -> `step_edges` (5 s bins) of it; a list of numbers -> checked and returned (with
    0 prepended when it starts above 0)."""
    if isinstance(edges, str):
        scheme, _, width = edges.strip().lower().partition(":")
        longest = max((float(d) for d in durations), default=0.0)
        if scheme == DOUBLING and not width:
            return doubling_edges(longest)
        if scheme == STEP and width:
            try:
                step = float(width)
            except ValueError:
                raise _scheme_error(edges) from None
            return step_edges(longest, step)
        raise _scheme_error(edges)
    try:
        values = [float(e) for e in edges]
    except (TypeError, ValueError):
        raise _scheme_error(edges) from None
    return _check_edges(values)


def describe_edges(edges: Sequence[float] | str, resolved: Sequence[float]) -> str:
    """``"doubling: 0 2 4 ... 256"``, ``"step:5: 0 5 10 15"`` or ``"0 5 10 60"``: the edges in
    seconds, for logs and metadata."""
    listed = " ".join(f"{e:g}" for e in resolved)
    return f"{edges.strip().lower()}: {listed}" if isinstance(edges, str) else listed


def bucketize(records: Iterable[dict], edges: Sequence[float] | str = DEFAULT_EDGES) -> list[Bucket]:
    """Assign records to [lo, hi) duration buckets; the last bucket is open. Empty buckets kept.

    ``edges``: a list of seconds or ``"doubling"`` (edges from the records' longest duration)."""
    records = list(records)
    for i, rec in enumerate(records):
        missing = [k for k in RECORD_KEYS if k not in rec]
        if missing:
            raise KeyError(f"record {i} (id={rec.get('id')!r}) lacks {missing}; records need {list(RECORD_KEYS)}")
        d = rec["duration"]
        if not isinstance(d, (int, float)) or math.isnan(d) or d < 0:
            raise ValueError(f"record {i} (id={rec.get('id')!r}) has a bad duration {d!r}")
    edges = resolve_edges(edges, (rec["duration"] for rec in records))
    buckets = [Bucket(bucket_label(lo, hi), lo, hi) for lo, hi in zip(edges, edges[1:])]
    buckets.append(Bucket(bucket_label(edges[-1], math.inf), edges[-1], math.inf))
    lows = np.asarray(edges)
    for rec in records:
        # index of the last edge <= duration; durations >= edges[-1] land in the open bucket
        k = int(np.searchsorted(lows, float(rec["duration"]), side="right")) - 1
        buckets[k].records.append(rec)
    return buckets


def bootstrap_ratio_ci(pairs: Sequence[tuple[np.ndarray, np.ndarray]], *, n_boot: int, rng: np.random.Generator,
                       ci: float = 0.95) -> list[tuple[float, float]]:
    """Percentile-bootstrap CIs of Σnum/Σden (in %) of each (num, den) pair of float arrays, all
    pairs on the same resampled items (paired draws). Returns one (low, high) per pair; (nan, nan)
    when no draw has a positive denominator.
    """
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    n = len(pairs[0][0])
    if n == 0 or n_boot <= 0:
        return [(math.nan, math.nan)] * len(pairs)
    sums = [(np.empty(n_boot), np.empty(n_boot)) for _ in pairs]
    chunk = max(1, _MAX_BOOT_ELEMENTS // n)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))          # (draws, n) resampled items
        for (a, b), (sa, sb) in zip(pairs, sums):
            sa[start:stop] = a[idx].sum(axis=1)
            sb[start:stop] = b[idx].sum(axis=1)
    out = []
    for sa, sb in sums:
        ok = sb > 0
        out.append(percentile_ci(100.0 * sa[ok] / sb[ok], ci) if ok.any() else (math.nan, math.nan))
    return out


def percentile_ci(draws: np.ndarray, ci: float) -> tuple[float, float]:
    """The (1 - ci)/2 and (1 + ci)/2 percentiles of bootstrap draws: a percentile-bootstrap CI."""
    lo, hi = np.percentile(draws, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(lo), float(hi)


def _ratio(num: float, den: float) -> float:
    return 100.0 * num / den if den > 0 else math.nan


def _row(label: str, lo: float, hi: float, recs: list[dict], n_boot: int, seed: int,
         ci: float) -> dict:
    def col(key):
        return np.array([float(r[key]) for r in recs])

    errors, words = col("errors"), col("ref_words")
    cerr, chars = col("char_errors"), col("ref_chars")
    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    (wl, wh), (cl, ch) = bootstrap_ratio_ci([(errors, words), (cerr, chars)], n_boot=n_boot, rng=rng, ci=ci)
    return {
        "bucket": label, "lo": lo, "hi": hi, "utterances": len(recs),
        "mean_duration": float(np.mean(col("duration"))),
        "ref_words": int(words.sum()), "errors": int(errors.sum()),
        "sub": int(col("sub").sum()), "del": int(col("del").sum()), "ins": int(col("ins").sum()),
        "wer": _ratio(errors.sum(), words.sum()), "wer_ci_low": wl, "wer_ci_high": wh,
        "ref_chars": int(chars.sum()), "char_errors": int(cerr.sum()),
        "cer": _ratio(cerr.sum(), chars.sum()), "cer_ci_low": cl, "cer_ci_high": ch,
    }


def bucket_table(records: Sequence[dict], edges: Sequence[float] | str = DEFAULT_EDGES, n_boot: int = 1000,
                 seed: int = 0, ci: float = 0.95) -> list[dict]:
    """One row per non-empty bucket (in edge order) plus a final ``all`` row; keys `ROW_KEYS`.

    Buckets without utterances get no row (they have no WER), in the files as on the console.

    WER/CER are pooled and in %; ``*_ci_low``/``*_ci_high`` are the percentile-bootstrap
    interval at level ``ci``. A bucket whose references hold no words has WER nan.
    """
    records = list(records)
    rows = [_row(b.label, b.lo, b.hi, b.records, n_boot, seed, ci)
            for b in bucketize(records, edges) if b.records]
    if records:
        rows.append(_row(ALL_LABEL, 0.0, math.inf, records, n_boot, seed, ci))
    return rows


# ----------------------------------------------------------------------------- formatting

def _num(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


_HEADER = ("bucket (s)", "utts", "mean dur (s)", "words", "sub", "del", "ins", "WER % [CI]", "CER % [CI]")


def _display_cells(row: dict) -> list[str]:
    return [str(row["bucket"]), str(row["utterances"]), _num(row["mean_duration"]),
            *(str(row[k]) for k in ("ref_words", "sub", "del", "ins")),
            *(f"{_num(row[m])} [{_num(row[f'{m}_ci_low'])}, {_num(row[f'{m}_ci_high'])}]" for m in ("wer", "cer"))]


def format_table(rows: Sequence[dict]) -> str:
    """Plain-text aligned table for the console (numbers right-aligned)."""
    body = [_display_cells(r) for r in rows]
    widths = [max(len(c) for c in col) for col in zip(_HEADER, *body)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
             for cells in (_HEADER, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _markdown(rows: Sequence[dict], meta: dict | None) -> str:
    out = []
    if meta:
        out += ["**" + " · ".join(f"{k}: {v}" for k, v in meta.items()) + "**", ""]
    out.append("| " + " | ".join(_HEADER) + " |")
    out.append("|" + "|".join([" --- "] + [" ---: "] * (len(_HEADER) - 1)) + "|")
    for r in rows:
        out.append("| " + " | ".join(_display_cells(r)) + " |")
    out += ["", "WER/CER pooled per bucket (Σ errors / Σ reference units); CER counts spaces; "
            "[CI] = percentile bootstrap over utterances; empty buckets omitted.", ""]
    return "\n".join(out)


def _csv_value(key: str, v) -> str:
    if isinstance(v, float):  # inf (an open bucket's hi) and nan (no reference words) format as "inf", "nan"
        return f"{v:.6g}" if key in ("lo", "hi") else f"{v:.4f}"
    return str(v)




def write_bucket_files(rows: Sequence[dict], out_dir: str | os.PathLike, meta: dict | None = None
                       ) -> dict[str, Path]:
    """Write ``buckets.csv``, ``buckets.md`` (and ``buckets.meta.json`` when ``meta``), atomically.

    ``meta`` (run name, PE, loss, decoding, test set, ...) becomes the md header line and a
    JSON sidecar so that plots can label runs without parsing markdown.
    """
    out_dir = Path(out_dir)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(ROW_KEYS)
    for r in rows:
        writer.writerow([_csv_value(k, r[k]) for k in ROW_KEYS])
    paths = {"csv": out_dir / BUCKETS_CSV, "md": out_dir / BUCKETS_MD}
    atomic_write_text(paths["csv"], buf.getvalue())
    atomic_write_text(paths["md"], _markdown(rows, meta))
    if meta is not None:
        paths["meta"] = out_dir / BUCKETS_META
        atomic_write_text(paths["meta"], json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return paths


def read_bucket_csv(path: str | os.PathLike) -> list[dict]:
    """Read a ``buckets.csv`` back into rows with numeric types (inf/nan restored)."""
    path = Path(path)
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [k for k in ("bucket", "lo", "hi", "mean_duration", "wer") if k not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}:1: header lacks columns {missing}")
        for line, raw in enumerate(reader, start=2):
            try:
                rows.append({k: v if k == "bucket" else int(v) if k in _INT_KEYS else float(v)
                             for k, v in raw.items()})
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}:{line}: bad value ({e})") from None
    return rows


# ----------------------------------------------------------------------------- per_utt.jsonl

def write_per_utt(records: Iterable[dict], path: str | os.PathLike) -> None:
    """Write one JSON object per utterance (``per_utt.jsonl``), atomically."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    atomic_write_text(path, text)


def read_per_utt(path: str | os.PathLike) -> list[dict]:
    """Read ``per_utt.jsonl``; a malformed line raises PerUttError naming file and line."""
    out = []
    for line_no, rec in read_jsonl(Path(path), PerUttError):
        missing = [k for k in RECORD_KEYS if k not in rec]
        if missing:
            raise PerUttError(f"{path}:{line_no}: missing keys {missing}")
        out.append(rec)
    return out
