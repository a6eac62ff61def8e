"""The study's figure: WER (or CER) versus input length, one line per PE, CI bands.

Inputs are run directories: a folder with ``run_info.json``
(``{"pe", "loss", "encoder", "seed", "train_max_duration", "label"}``) and
``eval/<test set>/buckets.csv`` (written by `asr_pe.evaluation.buckets.write_bucket_files`).
Any other folder given is searched recursively for run directories (a sweep).

Runs sharing a ``label`` (missing: ``"<pe>/<loss>"``; ``+<method>`` appended when the
evaluation's ``buckets.meta.json`` records a decoding other than CTC greedy) are seeds of one
configuration:
- the line is the mean over seeds of the pooled per-bucket metric;
- the band is the mean over seeds of the bootstrap CI bounds (utterance-level uncertainty of a
  typical seed; the spread across seeds is shown separately as faint per-seed markers);
- x is the bucket's mean utterance duration (mean over seeds; identical for one test set), log scale.

Outputs (``<m>`` = ``wer`` or ``cer`` from ``metric``): ``<m>_vs_length.png``,
``<m>_vs_length.csv`` (long format, one row per run and bucket, both WER and CER with their CIs,
the ``all`` row included) and ``<m>_vs_length.md`` (labels x buckets, then the relative
degradation table).

Relative degradation reference: for each label, the **last bucket whose upper edge is <=
the longest training utterance** (``train_max_duration``), i.e. the longest bucket lying
entirely inside the training length range, so the ratio measures only out-of-range
degradation. When no bucket lies entirely inside (training shorter than the first upper edge),
the bucket containing ``train_max_duration`` is used; without ``train_max_duration`` there is
no reference and the table says so.

A long-form set (every recording far past the training lengths) has no such bucket of its own;
``reference_set`` names another test set of the same runs (e.g. the short ``test`` set) whose
reference bucket is the denominator instead, so the table reads "CER at 160 s / CER at 2-4 s".
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from asr_pe.errors import MissingFileError, UserError
from asr_pe.evaluation.buckets import ALL_LABEL, atomic_write_text, read_bucket_csv
from asr_pe.io import atomic_path
from asr_pe.results_table import expand_run_paths, locate, logical_path
from asr_pe.run_folder import BUCKETS_CSV, BUCKETS_META, RUN_INFO, is_run_dir, result_dir, result_names, run_label
from asr_pe.run_folder import read_run_info as _read_run_info

__all__ = ["RunResult", "LabelSeries", "RunDirError", "find_run_dirs", "test_sets_of", "load_runs",
           "aggregate", "reference_bucket", "long_csv", "markdown_report", "plot_series",
           "make_report", "METRICS"]

log = logging.getLogger(__name__)

METRICS = ("wer", "cer")
CSV_KEYS = ("label", "pe", "loss", "encoder", "remedy", "seed", "test_set", "bucket", "lo", "hi",
            "mean_duration", "utterances", "wer", "wer_ci_low", "wer_ci_high", "cer",
            "cer_ci_low", "cer_ci_high", "run_dir")


class RunDirError(UserError, ValueError):
    """A run directory that cannot be read (bad run_info.json, no matching eval folder)."""


@dataclass
class RunResult:
    run_dir: Path
    info: dict
    test_set: str
    rows: list[dict]                # buckets.csv rows (bucket rows in edge order, then "all")

    decode: str | None = None       # decode method from buckets.meta.json, when written
    eval_remedy: str | None = None  # inference remedy from buckets.meta.json (eval.remedy), when used

    @property
    def label(self) -> str:
        info = self.info
        base = run_label(info)
        # A CTC model decoded greedily is the plain case; any other decoding is part of what was
        # measured (one hybrid model gives different curves with CTC, attention or joint search).
        if self.decode and not (self.decode == "greedy" and info.get("loss", "ctc") == "ctc"):
            base = f"{base}+{self.decode}"
        return f"{base} @{self.eval_remedy}" if self.eval_remedy else base

    @property
    def remedy(self) -> str:
        """The remedies this result was measured with: the run's training remedy (run_info.json
        ``remedy``) and the evaluation's (``eval.remedy``), joined by '+'; "" for the plain model."""
        return "+".join(r for r in (self.info.get("remedy"), self.eval_remedy) if r)

    @property
    def seed(self):
        return self.info.get("seed")

    @property
    def train_max_duration(self) -> float | None:
        v = self.info.get("train_max_duration")
        return None if v is None else float(v)


@dataclass
class LabelSeries:
    """One label (seeds pooled): per bucket, mean metric, mean CI bounds, per-seed values."""
    label: str
    runs: list[RunResult]
    buckets: list[str] = field(default_factory=list)      # in lo order, "all" excluded
    lo: dict = field(default_factory=dict)
    hi: dict = field(default_factory=dict)
    mean_duration: dict = field(default_factory=dict)
    value: dict = field(default_factory=dict)             # bucket -> mean over seeds (nan-aware)
    ci_low: dict = field(default_factory=dict)
    ci_high: dict = field(default_factory=dict)
    per_seed: dict = field(default_factory=dict)          # bucket -> [value per run, nan if absent]

    @property
    def seeds(self) -> list:
        return [r.seed for r in self.runs]

    @property
    def train_max_duration(self) -> float | None:
        values = sorted({r.train_max_duration for r in self.runs if r.train_max_duration is not None})
        if len(values) > 1:
            log.warning("label %s: seeds disagree on train_max_duration %s; using the largest",
                        self.label, values)
        return values[-1] if values else None


# ----------------------------------------------------------------------------- discovery

def find_run_dirs(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Run dirs among ``paths``: a path holding run_info.json is a run, others are searched below.

    A study's archived runs live in its ``results.jsonl.xz`` (`asr_pe.results_table`): a path
    ``<study>/<run>`` or ``<study>/<pattern>`` that is no folder names runs of that table, and a
    folder searched below counts the runs of the tables in it; each comes back as a folder
    holding its files, in the order of the paths the runs were archived from."""
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        archived = expand_run_paths(p)
        if is_run_dir(p):
            found.append(p.resolve())
        elif p.is_dir():
            # a run folder on disk wins over the same run in a table (archived, then evaluated again)
            runs = dict(archived or []) | {q.parent: q.parent.resolve() for q in p.rglob(RUN_INFO)}
            found.extend(real for _, real in sorted(runs.items()))
        elif archived:
            found.extend(real for _, real in archived)
        elif not p.exists():
            raise MissingFileError(f"no such run or sweep directory: {p}")
        else:
            raise RunDirError(f"{p}: not a directory")
    return list(dict.fromkeys(found))           # a run reached twice counts once


def read_run_info(run_dir: Path) -> dict:
    """The run's ``run_info.json``; a bad one is a `RunDirError` naming the file and line."""
    return _read_run_info(locate(Path(run_dir)), error=RunDirError)


def _eval_meta(csv_path: Path) -> tuple[str | None, str | None]:
    """(decode method, inference remedy) evaluate.py recorded beside ``buckets.csv``; None for
    what the sidecar lacks (or without one)."""
    path = csv_path.with_name(BUCKETS_META)
    if not path.is_file():
        return None, None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(meta, dict):
        return None, None
    decode = meta.get("decode")
    method = str(decode["method"]) if isinstance(decode, dict) and decode.get("method") else None
    return method, (str(meta["remedy"]) if meta.get("remedy") else None)


def test_sets_of(run_dir: Path) -> list[str]:
    """Names of ``eval/<name>/`` folders of a run that hold a buckets.csv."""
    return result_names(locate(Path(run_dir)))


def load_runs(paths: Iterable[str | os.PathLike], test_set: str | None = None
              ) -> tuple[list[RunResult], str]:
    """Read every run's buckets for one test set; returns (runs, test set name).

    Without ``test_set`` the runs must share exactly one test set. Runs without the chosen
    test set are skipped with one logged warning that counts them.
    """
    run_dirs = find_run_dirs(paths)
    if not run_dirs:
        raise RunDirError(f"no run directories ({RUN_INFO}) found under {', '.join(map(str, paths))}")
    if test_set is None:
        names = sorted({n for d in run_dirs for n in test_sets_of(d)})
        if not names:
            raise RunDirError("none of the runs has eval/<test set>/buckets.csv; run evaluate.py first")
        if len(names) > 1:
            raise RunDirError(f"runs hold several test sets ({', '.join(names)}); pass --test-set")
        test_set = names[0]
    runs, missing = [], []
    for d in run_dirs:
        csv_path = result_dir(d, test_set) / BUCKETS_CSV
        if not csv_path.is_file():
            missing.append(str(logical_path(d)))
            continue
        runs.append(RunResult(d, read_run_info(d), test_set, read_bucket_csv(csv_path), *_eval_meta(csv_path)))
    if missing:
        log.warning("%d run(s) have no eval/%s/buckets.csv and are left out: %s",
                    len(missing), test_set, ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""))
    if not runs:
        raise RunDirError(f"no run has eval/{test_set}/buckets.csv")
    return runs, test_set


# ----------------------------------------------------------------------------- aggregation

def _nanmean(values: Sequence[float]) -> float:
    arr = np.array([v for v in values if v is not None], dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def check_one_run_per_seed(label: str, runs: Sequence[RunResult]) -> None:
    """Runs grouped under one label are its seeds: two runs of the same seed (a longer and a shorter
    fine-tune, a run archived in two studies) would be averaged as if they were independent seeds."""
    seen: dict[str, RunResult] = {}
    for r in runs:
        first = seen.setdefault(str(r.seed), r)
        if first is not r:
            raise RunDirError(f"{logical_path(first.run_dir)} and {logical_path(r.run_dir)} are both seed {r.seed} "
                              f"of {label!r}: a label's runs are pooled as seeds; pass one of them, or give them "
                              f"different names")


def aggregate(runs: Sequence[RunResult], metric: str = "wer") -> list[LabelSeries]:
    """Group runs by label (labels in first-seen order, seeds sorted) and average per bucket."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    by_label: dict[str, list[RunResult]] = defaultdict(list)
    for r in runs:
        by_label[r.label].append(r)
    series = []
    for label, group in by_label.items():
        check_one_run_per_seed(label, group)
        group = sorted(group, key=lambda r: (str(r.seed), str(logical_path(r.run_dir))))
        s = LabelSeries(label, group)
        bounds = {}
        for r in group:
            for row in r.rows:
                bounds.setdefault(row["bucket"], (row["lo"], row["hi"]))
        s.buckets = sorted((b for b in bounds if b != ALL_LABEL), key=lambda b: bounds[b][0])
        if ALL_LABEL in bounds:
            s.buckets.append(ALL_LABEL)
        for b in s.buckets:
            cells = [next((row for row in r.rows if row["bucket"] == b), None) for r in group]

            def col(key):
                return [math.nan if c is None else c[key] for c in cells]

            s.lo[b], s.hi[b] = bounds[b]
            s.mean_duration[b] = _nanmean(col("mean_duration"))
            s.per_seed[b] = col(metric)
            s.value[b] = _nanmean(col(metric))
            s.ci_low[b] = _nanmean(col(f"{metric}_ci_low"))
            s.ci_high[b] = _nanmean(col(f"{metric}_ci_high"))
        series.append(s)
    return series


def reference_bucket(s: LabelSeries) -> str | None:
    """The last bucket with hi <= train_max_duration, else the one containing it (module docstring)."""
    tmax = s.train_max_duration
    if tmax is None:
        return None
    buckets = [b for b in s.buckets if b != ALL_LABEL and not math.isnan(s.value[b])]
    inside = [b for b in buckets if s.hi[b] <= tmax + 1e-9]
    if inside:
        return inside[-1]
    containing = [b for b in buckets if s.lo[b] <= tmax < s.hi[b]]
    return containing[0] if containing else None


# ----------------------------------------------------------------------------- outputs

def format_value(x: float, digits: int = 1) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _csv_cell(v) -> str:
    if isinstance(v, float):
        return "inf" if math.isinf(v) else ("nan" if math.isnan(v) else f"{v:.4f}")
    return "" if v is None else str(v)


def _display_path(path: Path) -> str:
    """Relative to the working directory when below it: a committed CSV names no machine's paths."""
    try:
        return str(logical_path(Path(path).resolve()).relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def long_csv(runs: Sequence[RunResult]) -> str:
    """One row per (run, bucket) with both metrics; see `CSV_KEYS`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_KEYS)
    for r in sorted(runs, key=lambda r: (r.label, str(r.seed), str(logical_path(r.run_dir)))):
        for row in r.rows:
            values = {"label": r.label, "pe": r.info.get("pe"), "loss": r.info.get("loss"),
                      "encoder": r.info.get("encoder"), "remedy": r.remedy, "seed": r.seed, "test_set": r.test_set,
                      "run_dir": _display_path(r.run_dir), **row}
            w.writerow([_csv_cell(values.get(k)) for k in CSV_KEYS])
    return buf.getvalue()


def all_buckets(series: Sequence[LabelSeries]) -> list[str]:
    """The buckets of all series in duration order, ``all`` last when present."""
    bounds = {}
    for s in series:
        for b in s.buckets:
            bounds.setdefault(b, s.lo[b])
    order = sorted((b for b in bounds if b != ALL_LABEL), key=lambda b: bounds[b])
    return order + ([ALL_LABEL] if ALL_LABEL in bounds else [])


def ci_cell(s: LabelSeries, bucket: str) -> str:
    """``7.6 [6.2, 9.2]``: seed mean [mean CI bounds], then the per-seed values when there are
    several (``(7.4, 7.8)``); ``–`` for a bucket the series lacks."""
    if bucket not in s.value:
        return "–"
    cell = f"{format_value(s.value[bucket])} [{format_value(s.ci_low[bucket])}, {format_value(s.ci_high[bucket])}]"
    if len(s.runs) > 1:
        cell += " (" + ", ".join(format_value(v) for v in s.per_seed[bucket]) + ")"
    return cell


def seeds_cell(seeds: Sequence) -> str:
    """The ``seeds`` cell of a table: ``0, 1``; a system scored by score.py has no seed (its
    run_info.json says ``"seed": null``), shown as ``–`` rather than ``None``."""
    return ", ".join("–" if x is None else str(x) for x in seeds)


def markdown_report(series: Sequence[LabelSeries], metric: str, test_set: str,
                    reference: dict[str, LabelSeries] | None = None,
                    reference_set: str | None = None) -> str:
    """Two tables: metric [CI] per label and bucket, then the relative degradation.

    ``reference`` (label -> series of ``reference_set``) supplies the denominators when given; a
    label missing from it has no reference.
    """
    name = metric.upper()
    cols = all_buckets(series)
    n_runs = sum(len(s.runs) for s in series)
    out = [f"# {name} vs input length — test set `{test_set}`", "",
           f"{n_runs} run(s), {len(series)} label(s). Cell: {name} % pooled per duration bucket, "
           "mean over seeds [mean of the seeds' bootstrap CI bounds]; with several seeds the "
           "per-seed values follow in parentheses, in the order of the `seeds` column. "
           "Columns are bucket durations in seconds.", ""]
    out.append("| label | seeds | " + " | ".join(cols) + " |")
    out.append("| --- | --- |" + " ---: |" * len(cols))
    for s in series:
        cells = [ci_cell(s, b) for b in cols]
        out.append(f"| {s.label} | {seeds_cell(s.seeds)} | " + " | ".join(cells) + " |")

    where = f" of test set `{reference_set}`" if reference is not None else ""
    out += ["", f"## Relative degradation ({name} / {name} in the reference bucket{where})", "",
            f"Reference bucket{where}: the last bucket whose upper edge is <= the longest training "
            "utterance (`train_max_duration` in run_info.json), i.e. entirely inside the training "
            "length range; if none is, the bucket containing it. Ratios of the seed means.", ""]
    rel_cols = [b for b in cols if b != ALL_LABEL]
    out.append("| label | train max (s) | reference | " + " | ".join(rel_cols) + " |")
    out.append("| --- | ---: | --- |" + " ---: |" * len(rel_cols))
    for s in series:
        rs = s if reference is None else reference.get(s.label)
        ref = reference_bucket(rs) if rs is not None else None
        denominator = rs.value[ref] if ref is not None else math.nan
        tmax = s.train_max_duration
        cells = []
        for b in rel_cols:
            if ref is None or b not in s.value or not denominator > 0:
                cells.append("–")
            else:
                cells.append(f"{format_value(s.value[b] / denominator, 2)}×")
        shown = "n/a" if ref is None else (ref if reference is None else f"{reference_set}: {ref}")
        out.append(f"| {s.label} | {format_value(tmax, 2) if tmax is not None else '–'} | "
                   f"{shown} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def draw_series(ax, s: LabelSeries, *, color, ls: str = "-", label: str | None = None,
                band_alpha: float = 0.18, seeds: bool = True, lw: float = 1.8,
                zorder: float | None = None) -> bool:
    """Draw one label's buckets (``all`` excluded) on ``ax``: seed-mean line, shaded CI band (mean
    CI bounds; buckets with a nan bound get none), faint per-seed markers when there are several
    seeds. Buckets without a value or a positive mean duration are skipped. ``label`` defaults to
    ``<label> (<n> seeds)``; ``zorder`` stacks it (default: matplotlib's). Returns whether
    anything was drawn."""
    bs = [b for b in s.buckets if b != ALL_LABEL and not math.isnan(s.value[b]) and s.mean_duration[b] > 0]
    if not bs:
        return False
    x = np.array([s.mean_duration[b] for b in bs])
    y = np.array([s.value[b] for b in bs])
    lo = np.array([s.ci_low[b] for b in bs])
    hi = np.array([s.ci_high[b] for b in bs])
    n_seeds = len(s.runs)
    if label is None:
        label = f"{s.label} ({n_seeds} seed{'s' if n_seeds > 1 else ''})"
    z = {} if zorder is None else {"zorder": zorder}
    ax.plot(x, y, marker="o", ls=ls, color=color, lw=lw, ms=4, label=label, **z)
    ok = ~(np.isnan(lo) | np.isnan(hi))
    ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=band_alpha, lw=0, **z)
    if seeds and n_seeds > 1:
        for k in range(n_seeds):
            ys = np.array([s.per_seed[b][k] for b in bs])
            ax.scatter(x, ys, color=color, alpha=0.35, s=10, marker="x", lw=0.8, **z)
    return True


def format_length_axis(ax) -> None:
    """Log-x duration axis with plain-second ticks at powers of two (the default bucket edges)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(-4, 14)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def save_figure(fig, path: str | os.PathLike) -> None:
    """Write ``fig`` to ``path`` atomically (temporary file beside it, then os.replace)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")


def plot_series(series: Sequence[LabelSeries], path: str | os.PathLike, metric: str, test_set: str,
                title: str | None = None) -> None:
    """PNG: one line per label (seed mean), shaded CI band, faint per-seed markers, log-x, y from 0."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # no global backend switch
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.5, 4.8), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    # 10 colours, then the same colours dashed: every label stays distinguishable (a study has 12+)
    styles = [(f"C{i % 10}", "-" if i < 10 else "--") for i in range(len(series))]
    for s, (color, line) in zip(series, styles):
        draw_series(ax, s, color=color, ls=line)
    tmaxes = sorted({s.train_max_duration for s in series if s.train_max_duration is not None})
    for t in tmaxes:
        ax.axvline(t, color="0.3", ls="--", lw=1, label=f"longest training utterance ({t:.2f} s)")
    format_length_axis(ax)
    ax.set_ylim(bottom=0)   # an error rate from 0: a range cut below would magnify small differences
    ax.set_xlabel("utterance duration (s, bucket mean)")
    ax.set_ylabel(f"{metric.upper()} (%)")
    ax.set_title(title or f"{metric.upper()} vs input length — {test_set}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never hides a line
    fig.tight_layout()
    save_figure(fig, path)


def make_report(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike, *,
                test_set: str | None = None, metric: str = "wer", title: str | None = None,
                reference_set: str | None = None) -> dict[str, Path]:
    """Read runs, write ``<metric>_vs_length.{png,csv,md}`` into ``out_dir``; returns the paths.

    ``reference_set``: take the relative-degradation denominators from that test set of the same
    runs (module docstring).
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    paths = list(paths)
    runs, test_set = load_runs(paths, test_set)
    series = aggregate(runs, metric)
    reference = None
    if reference_set is not None and reference_set != test_set:
        ref_runs, _ = load_runs(paths, reference_set)
        reference = {r.label: r for r in aggregate(ref_runs, metric)}
        missing = [s.label for s in series if s.label not in reference]
        if missing:
            log.warning("%d label(s) have no eval/%s results, so no reference: %s",
                        len(missing), reference_set, ", ".join(missing))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{metric}_vs_length"
    files = {"png": out_dir / f"{stem}.png", "csv": out_dir / f"{stem}.csv", "md": out_dir / f"{stem}.md"}
    atomic_write_text(files["csv"], long_csv(runs))
    atomic_write_text(files["md"], markdown_report(series, metric, test_set, reference, reference_set))
    plot_series(series, files["png"], metric, test_set, title)
    return files


def print_report(make: Callable[[], dict], errors: tuple[type[BaseException], ...]) -> int:
    """The end of every ``scripts/plot_*`` report script: log to stderr, build the report with
    ``make()`` -> {kind: path} (``md`` among them), print its markdown and the files it wrote;
    exit status 0, or 2 with one ``error:`` line for one of ``errors``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        files = make()
    except errors as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(Path(files["md"]).read_text())
    for kind, path in files.items():
        print(f"{kind}: {path}")
    return 0
