"""The study's figure for a corpus recipe: WER (or CER) versus input length per PE, every test set.

The CAPE study's length figure puts, per evaluation set, the error rate of each positional
encoding against the duration of the audio. `plot_corpus_figure` draws that from a recipe's run
folders: one panel per test set (e.g. test-clean, test-clean_long, test-other, test-other_long;
or TED-LIUM's test, test_long, test_talks), one line per label (PE/loss; seeds pooled as in
`wer_vs_length.aggregate`) with its bootstrap CI band, x the bucket's mean duration on a shared
log axis (so a set's curve continues where the previous set's ends), y shared across panels and from 0, and
the longest training utterance as a dashed line. Each PE keeps its colour in every panel.

Our buckets are the doubling scheme of ``eval.edges`` (0-2, 2-4, ... s), not the paper's own
duration bins, so the points are not at the paper's x positions: compare shapes and ratios.
The paper's own bins (5 s steps of the natural utterances) are `asr_pe.plots.natural_bins`.

Also writes ``<stem>.csv``: the long table of every plotted point (`wer_vs_length.long_csv` per
set, concatenated), so the numbers behind the figure are kept beside it.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Iterable, Sequence

from asr_pe.io import atomic_write_text

from .wer_vs_length import (
    METRICS, LabelSeries, RunDirError, aggregate, draw_series, find_run_dirs, format_length_axis, load_runs,
    long_csv, save_figure, test_sets_of,
)

__all__ = ["corpus_test_sets", "plot_corpus_figure"]

log = logging.getLogger(__name__)


def corpus_test_sets(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Every test set any run holds (eval/<set>/buckets.csv), sorted: short sets before their
    ``_long`` / ``_talks`` companions (test-clean, test-clean_long, test-other, ...)."""
    names = sorted({n for d in find_run_dirs(paths) for n in test_sets_of(d)})
    return sorted(names, key=lambda n: (n.split("_")[0], n != n.split("_")[0], n))


def plot_corpus_figure(paths: Iterable[str | os.PathLike], out: str | os.PathLike, *,
                       test_sets: Sequence[str] | None = None, metric: str = "wer",
                       title: str | None = None) -> dict[str, Path]:
    """Write ``out`` (PNG) and ``out`` with .csv; returns {"png": ..., "csv": ...}.

    ``test_sets``: the panels, in order (default: `corpus_test_sets`). A set that no run holds is
    an error (RunDirError) naming it: a figure silently missing a panel would read as complete."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    paths = list(paths)
    sets = list(test_sets) if test_sets else corpus_test_sets(paths)
    if not sets:
        raise RunDirError("none of the runs has eval/<test set>/buckets.csv; run the evaluation stage first")
    panels: list[tuple[str, list[LabelSeries]]] = []
    table = []
    for name in sets:
        runs, _ = load_runs(paths, name)
        panels.append((name, aggregate(runs, metric)))
        part = long_csv(runs)
        table.append(part if not table else part.split("\n", 1)[1])  # one header
    labels = list(dict.fromkeys(s.label for _, series in panels for s in series))
    colors = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    styles = {label: "-" if i < 10 else "--" for i, label in enumerate(labels)}

    from matplotlib.backends.backend_agg import FigureCanvasAgg   # no global backend switch
    from matplotlib.figure import Figure

    n = len(panels)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(3.6 * cols + 2.2, 3.2 * rows), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False).ravel()
    tmaxes = sorted({s.train_max_duration for _, series in panels for s in series
                     if s.train_max_duration is not None})
    for ax, (name, series) in zip(axes, panels):
        for s in series:
            draw_series(ax, s, color=colors[s.label], ls=styles[s.label], label=s.label)
        for t in tmaxes:
            ax.axvline(t, color="0.3", ls="--", lw=1)
        format_length_axis(ax)
        ax.set_ylim(bottom=0)   # shared y, from 0 (an error rate)
        ax.set_title(name, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[(rows - 1) * cols:]:
        ax.set_xlabel("input duration (s, bucket mean)")
    for ax in axes[::cols]:
        ax.set_ylabel(f"{metric.upper()} (%)")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[lb], ls=styles[lb], marker="o", ms=4, label=lb) for lb in labels]
    handles += [Line2D([], [], color="0.3", ls="--", lw=1, label=f"longest training input ({t:.1f} s)")
                for t in tmaxes]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle(title or f"{metric.upper()} versus input length per positional encoding", fontsize=11)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    files = {"png": out, "csv": out.with_suffix(".csv")}
    save_figure(fig, files["png"])
    atomic_write_text(files["csv"], "".join(t if t.endswith("\n") else t + "\n" for t in table))
    log.info("%s: %d panel(s) (%s), %d label(s)", out, n, ", ".join(sets), len(labels))
    return files
