"""The length study's main figure: the dose-response curve of length on the ladder.

For every run under the given paths that was decoded on a ladder pool (`scripts/evaluate_ladder.py`
or ``evaluate.py data.test=[...]`` with the ladder's manifests), `ladder_series` computes the
in-context ratio per (variant, rung) (`asr_pe.evaluation.ladder_report.run_ladder`) and pools the
seeds of each label (crossed CI: one draw of recordings for every seed, and a draw of seeds). `plot_dose_response` draws one panel
per join variant: x the rung (seconds of speech, log scale), y the in-context ratio (recordings
decoded whole over the same utterances decoded alone), one line per label with its 95 % CI band,
a line at 1 (no effect of length); `dose_response_markdown` gives the same numbers as a table
(rows: labels, columns: rungs) per variant.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from asr_pe.evaluation.in_context import InContextError, InContextResult
from asr_pe.evaluation.ladder_report import Key, pool_runs, pool_sets, run_ladder
from asr_pe.results_table import logical_path
from asr_pe.run_folder import PER_UTT, result_dir, run_label

from .wer_vs_length import find_run_dirs, read_run_info, save_figure

__all__ = ["ladder_series", "plot_dose_response", "dose_response_markdown"]

log = logging.getLogger(__name__)


def ladder_series(paths: Iterable[str | os.PathLike], index: Mapping[str, Any], *, pool: str = "test",
                  suffix: str = "", n_boot: int = 1000) -> dict[str, dict[Key, InContextResult]]:
    """label -> (variant, rung) -> in-context result with the label's seeds pooled; runs that
    were not decoded on every set of ``pool`` are left out (counted in one warning)."""
    _, sets = pool_sets(index, pool)
    by_label: dict[str, list[dict]] = {}
    missing = []
    for run_dir in find_run_dirs(paths):
        names = [Path(m).stem + suffix for m in sets.values()]
        if not all((result_dir(run_dir, n) / PER_UTT).is_file() for n in names):
            missing.append(str(logical_path(run_dir)))
            continue
        by_label.setdefault(run_label(read_run_info(run_dir)), []).append(
            run_ladder(run_dir, index, pool, suffix=suffix, n_boot=n_boot))
    if missing:
        log.warning("%d run(s) were not decoded on the ladder's %s pool%s and are left out: %s", len(missing),
                    pool, f" with suffix {suffix!r}" if suffix else "", ", ".join(missing[:5]))
    if not by_label:
        raise InContextError(f"no run under the given paths was decoded on every set of the ladder's {pool} pool")
    return {label: pool_runs(runs, n_boot=n_boot) for label, runs in by_label.items()}


def dose_response_markdown(series: Mapping[str, Mapping[Key, InContextResult]]) -> str:
    """One table per variant: rows the labels (by the ratio at the longest rung, largest first),
    columns the rungs, cells ``ratio [CI]``."""
    keys = sorted({k for res in series.values() for k in res})
    out = []
    for variant in sorted({v for v, _ in keys}):
        rungs = sorted({r for v, r in keys if v == variant})
        head = ["PE", "seeds"] + [f"{r:g} s" for r in rungs]
        lines = [f"### {variant}", "", "| " + " | ".join(head) + " |", "| --- | ---: |" + " ---: |" * len(rungs)]

        def last(label):
            res = series[label].get((variant, rungs[-1]))
            return -res.ratio if res is not None and not math.isnan(res.ratio) else math.inf

        for label in sorted(series, key=last):
            cells = []
            seeds = "–"
            for r in rungs:
                res = series[label].get((variant, r))
                if res is None or math.isnan(res.ratio):
                    cells.append("–")
                    continue
                seeds = str(res.extra.get("seeds", 1))
                ci = "" if math.isnan(res.ci_low) else f" [{res.ci_low:.2f}, {res.ci_high:.2f}]"
                cells.append(f"{res.ratio:.2f}{ci}")
            lines.append("| " + " | ".join([label.removesuffix("/ctc"), seeds] + cells) + " |")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def plot_dose_response(series: Mapping[str, Mapping[Key, InContextResult]], path: str | os.PathLike, *,
                       title: str | None = None):
    """PNG: a panel per join variant, the in-context ratio versus the rung per label with CI bands.
    Returns the Figure (axes: the variants in name order)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    variants = sorted({v for res in series.values() for v, _ in res})
    if not variants:
        raise ValueError("nothing to plot")
    fig = Figure(figsize=(5.2 * len(variants) + 2.2, 4.6), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, len(variants), i + 1) for i in range(len(variants))]
    labels = sorted(series)
    for ax, variant in zip(axes, variants):
        for i, label in enumerate(labels):
            pts = sorted((r, res) for (v, r), res in series[label].items() if v == variant and not math.isnan(res.ratio))
            if not pts:
                continue
            x = np.array([r for r, _ in pts])
            y = np.array([res.ratio for _, res in pts])
            lo = np.array([res.ci_low for _, res in pts])
            hi = np.array([res.ci_high for _, res in pts])
            color = f"C{i % 10}"
            ax.plot(x, y, marker="o", color=color, lw=1.6, ms=4, ls="-" if i < 10 else "--",
                    label=label.removesuffix("/ctc"))
            ok = ~(np.isnan(lo) | np.isnan(hi))
            ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.12, lw=0)
        ax.axhline(1.0, color="0.3", lw=1)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(-2, 12)] + [5, 10, 20, 40, 80, 160, 320]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("recording length (s of speech)")
        ax.set_ylabel("in-context ratio (whole / alone)")
        ax.set_title(f"joins: {variant}", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[-1].legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title or "Dose-response of length: the same utterances decoded inside longer recordings "
                 "(band: 95 % CI, seeds then recordings)", fontsize=10.5)
    save_figure(fig, path)
    return fig
