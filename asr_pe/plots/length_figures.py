"""Readable study figures: CER (or WER) versus length faceted by PE family, and per-PE remedies.

Two figures, both read from the run directories `wer_vs_length.load_runs` reads and drawn with
its helpers (`draw_series`, `format_length_axis`, `save_figure`):

``plot_faceted``: one panel per PE family (`pe_family`, from the PE classes: where the PE acts: input stage,
q/k rotation, attention-logit bias, after softmax; unknown names go to ``other``), per encoder or
per study arm (run_info.json ``arm``; the main study's runs have none). Each panel shows its
labels' short-set buckets (line: seed mean; band: mean of the seeds' bootstrap CI bounds; x:
per-seed values) and, on the same log-x axis, the long-form set's point (diamond with its mean CI
as whisker, joined by a dotted segment: another test set, no data in between). The ``none`` PE is
the reference: dashed grey in every family panel. A last panel gives, per label, the headline:
the **in-context ratio** where the runs have per-utterance scores and the long set's parts are
known (`asr_pe.plots.in_context_table`: the long recordings decoded whole over the same utterances
decoded alone, seeds pooled; whisker: the 95 % crossed bootstrap CI (recordings x seeds);
ticks: each seed's ratio). Elsewhere it falls back to the cross-set ratio long-form /
reference bucket (default ``2-4`` s of the short set; different content): the point is the
**ratio of the seed means**, the whisker its 95 % bootstrap CI where the parts are known (each
recording drawn with the reference utterances inside it, `asr_pe.evaluation.length_ratio`),
otherwise the min..max of the per-seed ratios, and the panel's caption says which.

``plot_remedies``: for one PE, one line per remedy (the plain model, each inference
remedy ``eval/<set>_<remedy>``, chunked inference, each training remedy of the runs given),
seeds pooled, over the short set's buckets plus the long-form point, with CI bands.

Both return the matplotlib Figure after writing the PNG atomically (temporary file + os.replace);
matplotlib is used through Figure + FigureCanvasAgg, with no global backend switch.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from asr_pe.models import positional

from .in_context_table import LabelInContext, label_in_context
from .study_summary import _remedy_results, ratio_ci
from .wer_vs_length import (
    ALL_LABEL, METRICS, LabelSeries, RunDirError, RunResult, aggregate, draw_series, find_run_dirs,
    format_length_axis, load_runs, read_run_info, save_figure,
)

__all__ = ["FAMILY_ORDER", "REFERENCE", "OTHER", "MAIN_ARM", "FACETS", "pe_family", "facet_members", "LengthRatio",
           "long_short_ratios", "in_context_ratios", "plot_faceted", "plot_remedies", "make_study_figures"]

log = logging.getLogger(__name__)

REFERENCE = "none"           # the family of the PE-free model: drawn as reference in every panel
OTHER = "other"              # the facet of PE names the map does not know

# Where each PE acts, from the PE classes (``asr_pe.models.positional.pe_family``), then the PEs
# no class explains
FAMILY_ORDER = (*positional.FAMILY_ORDER, OTHER)
FAMILY_TITLES = {"input": "input stage (added to the features)", "q/k rotation": "q/k rotation",
                 "logit bias": "attention-logit bias", "after softmax": "after softmax", OTHER: "other PEs",
                 REFERENCE: "no PE"}
REFERENCE_STYLES = ("--", ":", "-.")
# distinct colours, grey left out (the reference's): tab10 without C7, then four more
PALETTE = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C8", "C9", "navy", "#b8860b", "#e7298a", "black")
DPI = 150                    # of the PNGs
MAX_INSIDE_LEGEND = 7        # a panel with more labels has its legend beside it
DODGE = 0.035                # long-form points of one panel sit this far apart (natural log of x)


def pe_family(pe: str | None) -> str:
    """The facet of a PE name: its family (``asr_pe.models.positional.pe_family``; ``none`` is
    ``REFERENCE``), ``other`` for names no registered PE explains."""
    return positional.pe_family(pe) or OTHER


def _family_of(s: LabelSeries) -> str:
    return pe_family(s.runs[0].info.get("pe"))


def _encoder_of(s: LabelSeries) -> str:
    return str(s.runs[0].info.get("encoder") or "transformer")


MAIN_ARM = "study"           # the facet of runs without an ``arm`` (the main study's)
FACETS = ("family", "encoder", "arm")


def _arm_of(s: LabelSeries) -> str:
    return str(s.runs[0].info.get("arm") or MAIN_ARM)


def _short_name(label: str) -> str:
    return label.removesuffix("/ctc").replace("/ctc ", " ")


# ----------------------------------------------------------------------------- ratios

@dataclass
class LengthRatio:
    """Long-form value over the reference bucket's, for one label: ``ratio`` of the seed means,
    ``low``/``high`` its bootstrap CI (``is_ci``) or, without per-utterance scores, the min/max of
    ``per_seed`` (each run's long over its own reference value)."""
    label: str
    ratio: float
    low: float
    high: float
    per_seed: list[float]
    is_ci: bool = False


def _by_run(s: LabelSeries, bucket: str) -> dict[Path, float]:
    return {r.run_dir: v for r, v in zip(s.runs, s.per_seed.get(bucket, [])) if not math.isnan(v)}


def in_context_ratios(in_context: Mapping[str, LabelInContext]) -> list[LengthRatio]:
    """Per label: the in-context ratio (the long recordings decoded whole over the same utterances
    decoded alone, seeds pooled) with its crossed CI (recordings x seeds) and each seed's
    ratio (`asr_pe.plots.in_context_table.label_in_context`), sorted by ratio."""
    out = []
    for label, item in in_context.items():
        p = item.pooled
        if math.isnan(p.ratio):
            continue
        ci = (p.ci_low, p.ci_high) if not math.isnan(p.ci_low) else (p.ratio, p.ratio)
        out.append(LengthRatio(label, p.ratio, min(ci[0], p.ratio), max(ci[1], p.ratio),
                               [r.ratio for r in item.per_seed], is_ci=not math.isnan(p.ci_low)))
    return sorted(out, key=lambda r: r.ratio)


def long_short_ratios(series_short: Sequence[LabelSeries], series_long: Sequence[LabelSeries], *,
                      ref_bucket: str = "2-4", long_bucket: str = ALL_LABEL, metric: str = "cer",
                      n_boot: int = 1000, parts: Mapping[str, Mapping] | None = None) -> list[LengthRatio]:
    """Per label present in both: ``long_bucket`` of the long set over ``ref_bucket`` of the short
    set (`LengthRatio`), sorted by ratio: the cross-set ratio, measured on different content.
    Runs are paired by run directory. The CI resamples the runs' ``per_utt.jsonl``
    (`length_ratio_ci`, ``n_boot`` draws) only where ``parts`` (label -> recording id -> source
    ids) says which short utterances each long recording holds, so that they are drawn together;
    elsewhere the whiskers are the seeds' min..max (the sets may overlap: two independent draws
    would give no valid interval)."""
    if series_short and not any(ref_bucket in s.value for s in series_short):
        raise ValueError(f"reference bucket {ref_bucket!r} is in none of the short set's buckets "
                         f"({', '.join(b for b in series_short[0].buckets if b != ALL_LABEL)})")
    long = {s.label: s for s in series_long}
    out = []
    for s in series_short:
        ls = long.get(s.label)
        ref = s.value.get(ref_bucket, math.nan)
        if ls is None or not ref > 0 or math.isnan(ls.value.get(long_bucket, math.nan)):
            continue
        ref_runs, long_runs = _by_run(s, ref_bucket), _by_run(ls, long_bucket)
        per_seed = [long_runs[d] / ref_runs[d] for d in ref_runs if d in long_runs and ref_runs[d] > 0]
        ratio = ls.value[long_bucket] / ref
        label_parts = (parts or {}).get(s.label)
        ci = ratio_ci(s, ls, ref_bucket, long_bucket, metric=metric, n_boot=n_boot,
                      parts=label_parts) if label_parts else None
        if ci is not None:
            out.append(LengthRatio(s.label, ratio, min(ci[0], ratio), max(ci[1], ratio), per_seed, is_ci=True))
        else:
            out.append(LengthRatio(s.label, ratio, min(per_seed, default=ratio), max(per_seed, default=ratio),
                                   per_seed))
    return sorted(out, key=lambda r: r.ratio)


# ----------------------------------------------------------------------------- drawing helpers

def _new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # no global backend switch
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _long_points(s: LabelSeries) -> list[str]:
    """The long set's buckets to draw: all but ``all``, else ``all``."""
    bs = [b for b in s.buckets if b != ALL_LABEL and not math.isnan(s.value[b])]
    return bs or [b for b in s.buckets if not math.isnan(s.value[b])]


def _draw_long(ax, short: LabelSeries | None, long: LabelSeries, *, color, lw: float = 1.2,
               zorder: float = 3, dodge: float = 1.0) -> None:
    """The long-form point(s): diamond, CI whisker, per-seed crosses, dotted link to the short line.
    ``dodge`` multiplies x, so that the whiskers of one panel's labels stand side by side."""
    bs = _long_points(long)
    if not bs:
        return
    x = np.array([long.mean_duration[b] for b in bs]) * dodge
    y = np.array([long.value[b] for b in bs])
    err = np.array([[y[i] - long.ci_low[b], long.ci_high[b] - y[i]] for i, b in enumerate(bs)]).T
    ax.errorbar(x, y, yerr=np.nan_to_num(err), fmt="D", color=color, ms=4.5, capsize=2.5, lw=lw,
                zorder=zorder + 1)
    if short is not None:
        last = [b for b in short.buckets if b != ALL_LABEL and not math.isnan(short.value[b])]
        if last:
            ax.plot([short.mean_duration[last[-1]], x[0]], [short.value[last[-1]], y[0]],
                    ls=":", color=color, lw=lw, zorder=zorder)
    if len(long.runs) > 1:
        for k in range(len(long.runs)):
            ax.scatter(x, [long.per_seed[b][k] for b in bs], color=color, alpha=0.35, s=10, marker="x", lw=0.8)


def _dodge(k: int, n: int) -> float:
    return math.exp(DODGE * (k - (n - 1) / 2))


def _without_shared_band(s: LabelSeries, plain: LabelSeries | None) -> LabelSeries:
    """``s`` with no CI band over its leading buckets whose numbers equal ``plain``'s (short inputs a
    remedy leaves as they were: the same predictions; their band is the plain model's)."""
    if plain is None or s is plain:
        return s
    ci_low, ci_high = dict(s.ci_low), dict(s.ci_high)
    for b in s.buckets:
        same = b in plain.value and all(math.isclose(getattr(s, k)[b], getattr(plain, k).get(b, math.nan),
                                                     rel_tol=1e-9, abs_tol=1e-9)
                                        for k in ("value", "ci_low", "ci_high"))
        if not same:
            break
        ci_low[b] = ci_high[b] = math.nan
    return dataclasses.replace(s, ci_low=ci_low, ci_high=ci_high)


def _train_lines(ax, series: Iterable[LabelSeries]) -> list[float]:
    tmaxes = sorted({s.train_max_duration for s in series if s.train_max_duration is not None})
    for t in tmaxes:
        ax.axvline(t, color="0.3", ls="--", lw=1)
    return tmaxes


def _key_handles(tmaxes: Sequence[float], long_name: str, seeds: bool = True):
    """Legend entries explaining the marks (shared by every panel); ``seeds``: with the per-seed crosses."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color="0.2", marker="o", ms=4, lw=1.6, label="seed mean"),
               Patch(color="0.2", alpha=0.18, lw=0, label="band: mean of the seeds' bootstrap CIs"),
               Line2D([], [], color="0.2", marker="x", ls="none", alpha=0.5, label="single seeds"),
               Line2D([], [], color="0.2", marker="D", ls=":", ms=4.5, label=f"long-form set ({long_name}) ± CI")]
    handles += [Line2D([], [], color="0.3", ls="--", lw=1, label=f"longest training utterance ({t:.1f} s)")
                for t in tmaxes]
    return handles if seeds else [h for h in handles if h.get_label() != "single seeds"]


def _length_name(series: Iterable[LabelSeries], bucket: str, fallback: str) -> str:
    durations = [d for s in series if not math.isnan(d := s.mean_duration.get(bucket, math.nan))]
    return f"{round(sum(durations) / len(durations), -1):.0f} s" if durations else fallback


def _finish_length_axis(ax, metric: str, *, xlabel: bool = True, ylabel: bool = True) -> None:
    format_length_axis(ax)
    ax.set_ylim(bottom=0)
    if xlabel:
        ax.set_xlabel("utterance duration (s, bucket mean)")
    if ylabel:
        ax.set_ylabel(f"{metric.upper()} (%)")
    ax.grid(True, which="major", alpha=0.3)


# ----------------------------------------------------------------------------- faceted figure

def facet_members(series: Sequence[LabelSeries], facet: str = "family") -> dict[str, list[LabelSeries]]:
    """Panel name -> the series drawn in it, panels in drawing order. ``family``: the families
    present in `FAMILY_ORDER`, each with the ``none`` series first (the reference; a panel of
    its own when nothing else is there); ``encoder`` / ``arm``: the encoders / study arms in
    first-seen order."""
    if facet == "family":
        refs = [s for s in series if _family_of(s) == REFERENCE]
        present = {_family_of(s) for s in series} - {REFERENCE}
        if not present:
            return {REFERENCE: refs} if refs else {}
        return {f: refs + [s for s in series if _family_of(s) == f] for f in FAMILY_ORDER if f in present}
    if facet in ("encoder", "arm"):
        key = {"encoder": _encoder_of, "arm": _arm_of}[facet]
        return {k: [s for s in series if key(s) == k] for k in dict.fromkeys(key(s) for s in series)}
    raise ValueError(f"facet must be one of {FACETS}, got {facet!r}")


def plot_faceted(series_short: Sequence[LabelSeries], series_long: Sequence[LabelSeries],
                 path: str | os.PathLike, metric: str = "cer", facet: str = "family", *,
                 ref_bucket: str = "2-4", long_bucket: str = ALL_LABEL, short_set: str = "test",
                 long_set: str = "longform", title: str | None = None,
                 in_context: Mapping[str, LabelInContext] | None = None):
    """PNG of the study faceted by PE family (or encoder, or study arm), plus the ratio panel.

    With ``in_context`` (label -> `LabelInContext`, from `label_in_context`) the ratio panel is
    the in-context ratio (`in_context_ratios`: the long recordings decoded whole over the same
    utterances decoded alone, two-level CI), the study's headline; otherwise the cross-set ratio
    described below.

    ``series_short``/``series_long``: `aggregate` of the short and long-form sets of the same
    runs (labels matched). ``facet``: ``family`` (`pe_family`; the ``none`` PE is drawn dashed
    grey in every panel as the reference) or ``encoder`` (run_info.json ``encoder``; ``none`` is
    grey within its encoder's panel) or ``arm`` (run_info.json ``arm``, `MAIN_ARM` without one; as
    ``encoder``). Ratio panel: `long_short_ratios` of ``long_bucket`` over ``ref_bucket``: ratio
    of the seed means, whiskers min..max of the per-seed ratios (a spread, not a CI; the ratio of CI bounds is no CI and is not drawn). Returns the Figure; its axes are
    the facets in order, then the ratio panel (titles name them)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if facet not in FACETS:
        raise ValueError(f"facet must be one of {FACETS}, got {facet!r}")
    if not series_short:
        raise ValueError("no series to plot")
    from matplotlib.gridspec import GridSpec

    long = {s.label: s for s in series_long}
    refs = [s for s in series_short if _family_of(s) == REFERENCE]
    members = facet_members(series_short, facet)
    facets = list(members)
    titles = {f: FAMILY_TITLES[f] if facet == "family" else f"{facet}: {f}" for f in facets}

    # one style per label across the figure: the ratio panel's marker matches its line
    style: dict[str, tuple] = {}
    for s in refs:
        style[s.label] = ("0.45", REFERENCE_STYLES[len(style) % len(REFERENCE_STYLES)])
    others = [s for f in facets for s in members[f] if s.label not in style]
    # per encoder / arm: one colour per PE, so a PE reads the same in every panel
    color_key = (lambda s: s.label) if facet == "family" else (lambda s: s.runs[0].info.get("pe") or s.label)
    keys = list(dict.fromkeys(color_key(s) for s in others))
    for s in others:
        i = keys.index(color_key(s))
        style[s.label] = (PALETTE[i % len(PALETTE)], "-" if i < len(PALETTE) else "--")

    n = len(facets)
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    rows = math.ceil(n / cols)
    outside = MAX_INSIDE_LEGEND < max(len(m) for m in members.values())   # legends beside the panels
    fig = _new_figure((4.6 + 1.6 * outside) * cols + 4.6, 3.9 * rows + 1.2)
    grid = GridSpec(rows, cols + 1, figure=fig, width_ratios=[1.0] * cols + [0.95])
    long_name = _length_name(series_long, long_bucket, long_set)
    tmaxes: list[float] = []
    for i, f in enumerate(facets):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        with_long = [s.label for s in members[f] if s.label in long]
        alpha = min(0.16, max(0.07, 0.45 / len(members[f])))    # many bands in a panel: lighter
        for s in members[f]:
            color, ls = style[s.label]
            is_ref = s.label in {r.label for r in refs}
            draw_series(ax, s, color=color, ls=ls, label=_short_name(s.label) + (" (ref.)" if is_ref else ""),
                        band_alpha=0.10 if is_ref else alpha, lw=1.4 if is_ref else 1.8)
            if s.label in long:
                _draw_long(ax, s, long[s.label], color=color, dodge=_dodge(with_long.index(s.label), len(with_long)))
        tmaxes = sorted(set(tmaxes) | set(_train_lines(ax, members[f])))
        _finish_length_axis(ax, metric, xlabel=i // cols == rows - 1 or i + cols >= n, ylabel=i % cols == 0)
        ax.set_title(titles[f], fontsize=10)
        if len(members[f]) <= MAX_INSIDE_LEGEND:
            # the data sit well above 0 (the y axis starts there): the lower right stays free
            ax.legend(fontsize=7, loc="lower right", ncol=2, framealpha=0.85, handlelength=2.2, columnspacing=1.0)
        else:                                      # too many to fit inside: beside the panel
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), handlelength=2.2)

    ax = fig.add_subplot(grid[:, cols])
    if in_context:
        _draw_ratios(ax, in_context_ratios(in_context), style, metric=metric, ref_bucket=ref_bucket,
                     long_name=long_name, in_context=True)
    else:
        ratios = long_short_ratios(series_short, series_long, ref_bucket=ref_bucket, long_bucket=long_bucket,
                                   metric=metric)
        _draw_ratios(ax, ratios, style, metric=metric, ref_bucket=ref_bucket, long_name=long_name)
    seeds = any(len(s.runs) > 1 for s in series_short)
    fig.legend(handles=_key_handles(tmaxes, long_name, seeds), loc="outside lower center", ncol=5, fontsize=7.5,
               frameon=False)
    fig.suptitle(title or f"{metric.upper()} vs input length by {'PE family' if facet == 'family' else facet}"
                 f" — buckets of '{short_set}', long-form '{long_set}' ({long_name})", fontsize=11)
    save_figure(fig, path)
    return fig


def _draw_ratios(ax, ratios: Sequence[LengthRatio], style: dict, *, metric: str, ref_bucket: str,
                 long_name: str, in_context: bool = False) -> None:
    """Horizontal points with CI whiskers (min..max of the seeds where there is no CI), sorted by
    ratio (largest on top), each seed's ratio as a tick, a line at 1."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    for y, r in enumerate(ratios):
        color = style.get(r.label, ("0.2", "-"))[0]
        ax.errorbar([r.ratio], [y], xerr=[[r.ratio - r.low], [r.high - r.ratio]], fmt="o", color=color,
                    ms=6, capsize=3, lw=1.5)
        if len(r.per_seed) > 1:
            ax.scatter(r.per_seed, [y] * len(r.per_seed), color=color, marker="|", s=60, lw=1.2)
        ax.annotate(f"{r.ratio:.2f}×", (max(r.high, r.ratio), y), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=7.5)
    ax.axvline(1.0, color="0.3", lw=1)
    ax.set_yticks(range(len(ratios)), [_short_name(r.label) for r in ratios], fontsize=8)
    ax.set_ylim(-0.7, len(ratios) - 0.3)
    ax.set_xscale("log")
    hi = max([r.high for r in ratios] + [1.0])
    lo = min([r.low for r in ratios] + [1.0])
    ax.set_xlim(lo / 1.15, hi * 1.45)
    ax.xaxis.set_major_locator(FixedLocator([0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, axis="x", which="major", alpha=0.3)
    if in_context:
        ax.set_title(f"in-context ratio: {metric.upper()} of the {long_name} recordings\n"
                     f"decoded whole / the same utterances decoded alone", fontsize=9.5)
        ax.set_xlabel("point: Σ errors whole / Σ errors alone, seeds pooled; ticks: each seed\n"
                      "whiskers: 95 % bootstrap CI (seeds, then recordings)", fontsize=7.5)
        return
    ax.set_title(f"{metric.upper()} {long_name} / {metric.upper()} {ref_bucket} s (different content)", fontsize=10)
    whiskers = {r.is_ci for r in ratios}
    whisker = ("95 % bootstrap CI (recordings drawn with their utterances)" if whiskers == {True} else
               "min–max of the per-seed ratios (no per-utterance scores or parts)" if whiskers == {False} else
               "95 % bootstrap CI; min–max of seeds where no per-utterance scores or parts")
    ax.set_xlabel(f"point: ratio of the seed means; ticks: each seed\nwhiskers: {whisker}", fontsize=7.5)


# ----------------------------------------------------------------------------- remedy figure

def plot_remedies(run_dirs: Iterable[str | os.PathLike], pe: str, path: str | os.PathLike,
                  metric: str = "cer", *, short_set: str = "test", long_set: str = "longform",
                  title: str | None = None):
    """PNG for one PE (run_info.json ``pe``): one line per remedy (the plain model, each inference
    remedy, chunked inference, each training remedy among ``run_dirs``), seeds pooled, over the
    short set's buckets plus the long-form point(s), CI bands, the training-length line. Remedy
    names are `RunResult.remedy` (`study_summary._remedy_results`); legend entries are the
    remedy (``plain`` for none) and the long-form value, plain first, then by long-form value.
    Returns the Figure."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    run_dirs = list(run_dirs)
    groups: dict[str, tuple[str, list[RunResult], list[RunResult]]] = {}
    for run_dir in find_run_dirs(run_dirs):
        if read_run_info(run_dir).get("pe") != pe:
            continue
        for remedy, short, long in _remedy_results(run_dir, short_set, long_set):
            _, shorts, longs = groups.setdefault(short.label, (remedy, [], []))
            shorts.append(short)
            if long is not None:  # one label for the pair: the long set's meta may word it otherwise
                longs.append(dataclasses.replace(long, decode=short.decode, eval_remedy=short.eval_remedy))
    if not groups:
        raise RunDirError(f"no run with pe {pe!r} and eval/{short_set}/buckets.csv under "
                          f"{', '.join(map(str, run_dirs))}")
    names = {label: remedy or "plain" for label, (remedy, _, _) in groups.items()}
    if len(set(names.values())) < len(names):       # several models (losses, arms): name them fully
        names = {label: label for label in groups}
    lines = []
    for label, (remedy, shorts, longs) in groups.items():
        seeds = Counter(str(r.seed) for r in shorts)
        if any(c > 1 for c in seeds.values()):
            log.warning("%s: seed(s) %s appear in several runs; pooled as if different seeds", label,
                        ", ".join(k for k, c in seeds.items() if c > 1))
        s = aggregate(shorts, metric)[0]
        ls = aggregate(longs, metric)[0] if longs else None
        lv = ls.value.get(ALL_LABEL, math.nan) if ls is not None else math.nan
        lines.append((remedy, names[label], s, ls, lv))
    lines.sort(key=lambda t: (t[0] != "", math.inf if math.isnan(t[4]) else t[4]))

    fig = _new_figure(10.5, 5.4)
    ax = fig.add_subplot(1, 1, 1)
    long_name = _length_name([t[3] for t in lines if t[3] is not None], ALL_LABEL, long_set)
    n_seeds = {len(t[2].runs) for t in lines}
    colors = iter(PALETTE[i % len(PALETTE)] for i in range(1000))
    # on short inputs most remedies give the plain model's numbers: the plain line is drawn last
    # (on top), the others from the worst long-form value up, so the best ones lie above the rest
    plain = next((t[2] for t in lines if t[0] == ""), None)
    handles = {}
    for k, (remedy, name, s, ls, lv) in enumerate(lines):
        color = "0.1" if s is plain else next(colors)
        text = name if len(n_seeds) == 1 else f"{name} ({len(s.runs)} seed{'s' if len(s.runs) > 1 else ''})"
        if not math.isnan(lv):
            text += f": {lv:.1f} % at {long_name}"
        handles[k] = (color, text)
    for k in sorted(handles, key=lambda k: (lines[k][2] is plain, -k)):
        remedy, name, s, ls, lv = lines[k]
        color, text = handles[k]
        z = 4 if s is plain else 2
        draw_series(ax, _without_shared_band(s, plain), color=color, label=text, band_alpha=0.10,
                    lw=2.4 if s is plain else 1.5, ls="--" if remedy.startswith("chunked") else "-", zorder=z)
        if ls is not None:
            _draw_long(ax, s, ls, color=color, zorder=z, dodge=_dodge(k, len(lines)))
    tmaxes = _train_lines(ax, [t[2] for t in lines])
    _finish_length_axis(ax, metric)
    drawn, texts = ax.get_legend_handles_labels()
    by_text = dict(zip(texts, drawn))
    order = [handles[k][1] for k in range(len(lines))]          # plain first, then by long-form value
    n = min(n_seeds)
    seeds = f" ({n} seed{'s' if n > 1 else ''} each)" if len(n_seeds) == 1 else ""
    # the key first (a plain artist), the remedy legend last: the constrained layout makes room for
    # the axes' own legend only, and the remedy legend is the wider of the two
    key = ax.legend(handles=_key_handles(tmaxes, long_name, max(n_seeds) > 1), fontsize=7.5, loc="lower left",
                    bbox_to_anchor=(1.01, 0.0), frameon=False)
    ax.add_artist(key)
    ax.legend([by_text[t] for t in order], order, fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), title=f"remedy{seeds}", title_fontsize=8.5)
    ax.set_title(title or f"{pe}: {metric.upper()} vs input length per remedy — buckets of '{short_set}', "
                 f"long-form '{long_set}'", fontsize=10.5)
    save_figure(fig, path)
    return fig


# ----------------------------------------------------------------------------- both, from run dirs

def make_study_figures(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike, *,
                       metric: str = "cer", facet: str = "family", remedies_for: Sequence[str] = (),
                       remedy_paths: Iterable[str | os.PathLike] | None = None, short_set: str = "test",
                       long_set: str = "longform", ref_bucket: str = "2-4",
                       parts_path: str | os.PathLike | None = None) -> list[Path]:
    """Write ``<out>/<metric>_by_<facet>.png`` from ``paths`` and ``<out>/remedies_<pe>_<metric>.png``
    for each PE of ``remedies_for`` from ``remedy_paths`` (default: ``paths``); returns the files.
    The ratio panel is the in-context ratio where the runs have per-utterance scores and the long
    set's parts are known (``parts_path``, or the manifest each evaluation names)."""
    paths = list(paths)
    short_runs, _ = load_runs(paths, short_set)
    long_runs, _ = load_runs(paths, long_set)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"{metric}_by_{facet}.png"]
    in_context = label_in_context(paths, long_set=long_set, alone_set=short_set, parts_path=parts_path,
                                  metric=metric)
    plot_faceted(aggregate(short_runs, metric), aggregate(long_runs, metric), files[0], metric, facet,
                 ref_bucket=ref_bucket, short_set=short_set, long_set=long_set, in_context=in_context)
    remedy_paths = paths if remedy_paths is None else list(remedy_paths)
    for pe in remedies_for:
        files.append(out / f"remedies_{pe}_{metric}.png")
        plot_remedies(remedy_paths, pe, files[-1], metric, short_set=short_set, long_set=long_set)
    return files
