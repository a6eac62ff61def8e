"""The CAPE paper's length figure: error rate per 5 s bin of a corpus's *natural* test utterances.

The toolkit's own length axis joins utterances into long recordings (long-form sets, the
ladder). The paper measured length on the corpus as it is: the authors cut TED-LIUM 3's test set
into duration bins of 5 s (their lists ``tl_test_0-5s.lst``, ``tl_test_5-10s.lst``, ... made with
awk on the duration column) and drew WER per bin and PE. `natural_bins_report` draws that figure
from results the evaluation already wrote, nothing decoded again: each run's
``eval/<set>/per_utt.jsonl`` is bucketed with `asr_pe.evaluation.buckets.bucket_table` on
``step:5`` edges (`step_edges`: 0-5, 5-10, ... s up past the set's longest utterance; bins
without utterances have no point), beside the doubling buckets (``eval.edges``) of the
``wer_vs_length`` figures.

Per label (seeds of one configuration, `wer_vs_length.aggregate`) and bin:
- the value is Σ errors / Σ reference words (or characters) over the bin's utterances and the
  seeds: every seed scores the same utterances, so it equals the mean of the seeds' pooled rates;
- the 95 % interval is a crossed percentile bootstrap (`asr_pe.evaluation.in_context.two_level_ratio_ci`):
  the bin's utterances are resampled with replacement (one draw of indices for every seed, so an
  utterance's errors under each seed stay together), then the seeds are resampled. With one seed
  it is the utterance bootstrap of ``buckets.csv``. Seeds that scored different utterances are an
  error (their rates would not be comparable bin by bin).

Writes ``natural_bins.png`` (two panels, WER and CER, linear duration axis, one line per label
with its band, the longest training input dashed), ``natural_bins.md`` (a table per metric: the
value [CI] and the per-seed values, the utterances scored per bin), ``natural_bins.csv`` (one row
per label, metric and bin) and ``natural_bins_runs.csv`` (`wer_vs_length.long_csv`: per run and bin,
each seed's own utterance CI).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import math
import os
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from asr_pe.evaluation.buckets import ALL_LABEL, NATURAL_BIN_S, atomic_write_text, bucket_table, bucket_label, step_edges
from asr_pe.evaluation.in_context import read_records, two_level_ratio_ci
from asr_pe.results_table import logical_path
from asr_pe.run_folder import PER_UTT, result_dir

from .cape_paper import add_caption
from .wer_vs_length import (
    METRICS, LabelSeries, RunDirError, RunResult, aggregate, ci_cell, draw_series, load_runs, long_csv,
    save_figure, seeds_cell,
)

__all__ = ["NaturalBins", "natural_bins", "natural_bins_report", "COUNTS"]

log = logging.getLogger(__name__)

# metric -> (errors, reference units) columns of a per_utt.jsonl record
COUNTS = {"wer": ("errors", "ref_words"), "cer": ("char_errors", "ref_chars")}
CSV_KEYS = ("label", "seeds", "test_set", "metric", "bin", "lo", "hi", "utterances", "mean_duration",
            "value", "ci_low", "ci_high", "per_seed")


@dataclasses.dataclass
class NaturalBins:
    """One test set's natural-length bins: the runs re-bucketed, and per metric the labels'
    series whose ``ci_low``/``ci_high`` are the crossed (utterances x seeds) intervals."""
    test_set: str
    step: float
    edges: list[float]
    runs: list[RunResult]                          # rows: bucket_table of the step edges, per run
    series: dict[str, list[LabelSeries]]           # metric -> one series per label
    utterances: dict[str, dict[str, int]]          # label -> bin -> utterances scored (per seed)


def _records(run: RunResult) -> list[dict]:
    return read_records(result_dir(run.run_dir, run.test_set) / PER_UTT)


def _crossed_ci(label: str, runs: Sequence[RunResult], records: dict[Path, list[dict]],
                edges: Sequence[float], n_boot: int) -> tuple[dict, dict]:
    """{metric: {bin: (lo, hi)}} crossed over utterances and seeds, and {bin: utterances}."""
    first = records[runs[0].run_dir]
    ids = [r["id"] for r in first]
    for run in runs[1:]:
        other = [r["id"] for r in records[run.run_dir]]
        if sorted(other) != sorted(ids):
            raise RunDirError(
                f"{logical_path(run.run_dir)} and {logical_path(runs[0].run_dir)} are seeds of {label!r} but "
                f"scored different utterances of eval/{runs[0].test_set} ({len(other)} and {len(ids)}): "
                "evaluate every seed on the same manifest")
    by_seed = [{r["id"]: r for r in records[run.run_dir]} for run in runs]
    lows = np.asarray(edges[:-1], dtype=float)
    bins: dict[str, list[str]] = {}
    for rec in first:   # the bin of an utterance: its duration in the first seed's records
        k = int(np.searchsorted(lows, float(rec["duration"]), side="right")) - 1
        bins.setdefault(bucket_label(edges[k], edges[k + 1]), []).append(rec["id"])
    bins[ALL_LABEL] = ids
    out: dict[str, dict] = {m: {} for m in METRICS}
    for name, members in bins.items():
        for metric, (num_key, den_key) in COUNTS.items():
            num = np.array([[float(seed[u][num_key]) for u in members] for seed in by_seed])   # (S, R)
            den = np.array([[float(seed[u][den_key]) for u in members] for seed in by_seed])   # (S, R)
            lo, hi = two_level_ratio_ci(num, den, n_boot=n_boot,
                                        seed=zlib.crc32(f"{label}|{name}|{metric}".encode()))
            out[metric][name] = (100.0 * lo, 100.0 * hi)
    return out, {name: len(members) for name, members in bins.items()}


def natural_bins(paths: Iterable[str | os.PathLike], test_set: str, *, step: float = NATURAL_BIN_S,
                 n_boot: int = 1000) -> NaturalBins:
    """Read every run's ``eval/<test_set>/per_utt.jsonl`` and bin it by ``step`` seconds (module
    docstring). Runs without the set are left out with one warning (`load_runs`)."""
    runs, test_set = load_runs(list(paths), test_set)
    records = {run.run_dir: _records(run) for run in runs}
    longest = max((float(r["duration"]) for recs in records.values() for r in recs), default=0.0)
    edges = step_edges(longest, step)
    binned = [dataclasses.replace(run, rows=bucket_table(records[run.run_dir], edges, n_boot=n_boot, seed=0))
              for run in runs]
    series = {metric: aggregate(binned, metric) for metric in METRICS}
    utterances = {}
    for s_wer, s_cer in zip(series["wer"], series["cer"]):
        cis, counts = _crossed_ci(s_wer.label, s_wer.runs, records, edges, n_boot)
        utterances[s_wer.label] = counts
        for metric, s in (("wer", s_wer), ("cer", s_cer)):
            for name, (lo, hi) in cis[metric].items():
                s.ci_low[name], s.ci_high[name] = lo, hi
    return NaturalBins(test_set, float(step), edges, binned, series, utterances)


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.4f}"


def label_csv(nb: NaturalBins) -> str:
    """One row per label, metric and bin (`CSV_KEYS`); ``per_seed`` holds the seeds' rates joined by ';'."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_KEYS)
    for metric in METRICS:
        for s in nb.series[metric]:
            for b in s.buckets:
                w.writerow([s.label, seeds_cell(s.seeds), nb.test_set, metric, b, f"{s.lo[b]:g}",
                            "inf" if math.isinf(s.hi[b]) else f"{s.hi[b]:g}", nb.utterances[s.label][b],
                            _fmt(s.mean_duration[b]), _fmt(s.value[b]), _fmt(s.ci_low[b]), _fmt(s.ci_high[b]),
                            ";".join(_fmt(v) for v in s.per_seed[b])])
    return buf.getvalue()


def _bins(nb: NaturalBins) -> list[str]:
    order = [bucket_label(lo, hi) for lo, hi in zip(nb.edges, nb.edges[1:])]
    present = {b for s in nb.series["wer"] for b in s.buckets}
    return [b for b in order if b in present] + [ALL_LABEL]


def markdown(nb: NaturalBins, caption: str | None = None) -> str:
    cols = _bins(nb)
    n_runs = len(nb.runs)
    counts = {b: max((nb.utterances[s.label].get(b, 0) for s in nb.series["wer"]), default=0) for b in cols}
    out = [f"# Error rate per {nb.step:g} s bin of the natural utterances — test set `{nb.test_set}`", "",
           *([caption, ""] if caption else []),
           f"The CAPE paper's length figure: the set's own utterances binned by duration ({nb.step:g} s bins, "
           f"`step:{nb.step:g}` edges; bins without utterances left out), from each run's `per_utt.jsonl`. "
           f"{n_runs} run(s), {len(nb.series['wer'])} label(s). Cell: the rate pooled over the bin's utterances "
           "and the seeds (%) [95 % crossed bootstrap: utterances resampled within the bin, one draw for every "
           "seed, then seeds resampled; one seed: utterances only]; with several seeds the per-seed rates follow "
           "in parentheses, in the order of the `seeds` column.", "",
           "Utterances scored per bin (each seed): "
           + ", ".join(f"{b} s: {counts[b]}" if b != ALL_LABEL else f"all: {counts[b]}" for b in cols) + ".", ""]
    for metric in METRICS:
        out += [f"## {metric.upper()} (%)", "", "| label | seeds | " + " | ".join(cols) + " |",
                "| --- | --- |" + " ---: |" * len(cols)]
        for s in nb.series[metric]:
            out.append(f"| {s.label} | {seeds_cell(s.seeds)} | " + " | ".join(ci_cell(s, b) for b in cols) + " |")
        out.append("")
    return "\n".join(out)


def plot(nb: NaturalBins, path: str | os.PathLike, title: str | None = None, caption: str | None = None) -> None:
    """Two panels (WER, CER): x the bin's mean duration on a linear axis with the bin edges as
    ticks, one line per label (band: the crossed CI), y from 0, the longest training input dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # no global backend switch
    from matplotlib.figure import Figure

    labels = [s.label for s in nb.series["wer"]]
    colors = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    styles = {label: "-" if i < 10 else "--" for i, label in enumerate(labels)}
    fig = Figure(figsize=(11.5, 4.2), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharex=True)
    tmaxes = sorted({s.train_max_duration for s in nb.series["wer"] if s.train_max_duration is not None})
    for ax, metric in zip(axes, METRICS):
        for s in nb.series[metric]:
            draw_series(ax, s, color=colors[s.label], ls=styles[s.label], label=s.label)
        for t in tmaxes:
            if t <= nb.edges[-1]:
                ax.axvline(t, color="0.3", ls="--", lw=1)
        ax.set_xticks(nb.edges)
        ax.set_xlim(nb.edges[0], nb.edges[-1])
        ax.set_ylim(bottom=0)   # an error rate from 0
        ax.set_xlabel(f"utterance duration (s; {nb.step:g} s bins, bin mean)")
        ax.set_ylabel(f"{metric.upper()} (%)")
        ax.grid(True, alpha=0.3)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[lb], ls=styles[lb], marker="o", ms=4, label=lb) for lb in labels]
    handles += [Line2D([], [], color="0.3", ls="--", lw=1, label=f"longest training input ({t:.1f} s)")
                for t in tmaxes if t <= nb.edges[-1]]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle(title or f"WER and CER per {nb.step:g} s bin of the natural utterances — {nb.test_set} "
                 "(band: 95 % CI, utterances x seeds)", fontsize=10)
    add_caption(fig, caption)
    save_figure(fig, path)


def natural_bins_report(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike, *, test_set: str,
                        step: float = NATURAL_BIN_S, n_boot: int = 1000, title: str | None = None,
                        caption: str | None = None) -> dict[str, Path]:
    """Write ``natural_bins.{png,md,csv}`` and ``natural_bins_runs.csv`` into ``out_dir``; ``caption``
    (e.g. `asr_pe.plots.cape_paper.caption`) goes under the figure's title and into the markdown."""
    nb = natural_bins(paths, test_set, step=step, n_boot=n_boot)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"png": out_dir / "natural_bins.png", "md": out_dir / "natural_bins.md",
             "csv": out_dir / "natural_bins.csv", "runs_csv": out_dir / "natural_bins_runs.csv"}
    atomic_write_text(files["md"], markdown(nb, caption))
    atomic_write_text(files["csv"], label_csv(nb))
    atomic_write_text(files["runs_csv"], long_csv(nb.runs))
    plot(nb, files["png"], title, caption)
    log.info("%s: %d bins of %g s, %d run(s)", out_dir, len(nb.edges) - 1, step, len(nb.runs))
    return files
