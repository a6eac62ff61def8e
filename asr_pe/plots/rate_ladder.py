"""The rate ladder's tables and figure: error rate versus speaking rate per PE, same utterances at every rung.

Reads the rungs `asr_pe.evaluation.rate_ladder.evaluate_rates` decoded (``eval/<set>_tempo<f>`` /
``eval/<set>_hop<ms>``, the plain rung ``eval/<set>``) for many runs; seeds of one label
(`wer_vs_length.load_runs` labels them) are pooled. Per label and rung, from each run's
``per_utt.jsonl``:

- the rate: Σ errors / Σ reference words (characters for CER) over the utterances and seeds, with
  a 95 % crossed bootstrap CI (utterances resampled, one draw for every seed, then seeds;
  `asr_pe.evaluation.in_context.two_level_ratio_ci`);
- the ratio to the plain rung (as recorded, or the run's own hop): Σ errors at the rung / Σ errors
  of the same utterances at the plain rung (the references are the same, so it is the ratio of
  the rates), with the same crossed CI over the utterances' (rung, plain) error pairs: paired, as
  the in-context ratio is.

Every rung of every seed must have scored the same utterance ids as the plain rung, and every run
must have every rung, or the ladder is refused (`RateLadderError` naming the folder and the command
that decodes it): a rung on other utterances would not be the same words, and a ladder with a hole
would read as complete. The plain rung must be decoded too (it is the rate 1 / own-hop rung).

`rate_report` writes ``rate_<axis>.{png,md,csv}``.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from asr_pe.evaluation.buckets import atomic_write_text
from asr_pe.evaluation.in_context import read_records, two_level_ratio_ci
from asr_pe.evaluation.rate_ladder import RateLadderError, _check_axis, default_values, rung_rate, run_hop_ms
from asr_pe.results_table import locate, logical_path
from asr_pe.run_folder import PER_UTT, result_dir, result_name

from .cape_paper import add_caption
from .wer_vs_length import check_one_run_per_seed, load_runs, save_figure

__all__ = ["RungResult", "LabelLadder", "rate_ladder", "rate_markdown", "rate_csv", "plot_rate_ladder",
           "rate_report", "COUNTS"]

log = logging.getLogger(__name__)

COUNTS = {"wer": ("errors", "ref_words"), "cer": ("char_errors", "ref_chars")}
CSV_KEYS = ("label", "seeds", "test_set", "axis", "value", "metric", "utterances", "rate", "ci_low", "ci_high",
            "per_seed", "ratio", "ratio_ci_low", "ratio_ci_high")


@dataclass
class RungResult:
    """One label at one rung: rate and ratio to the plain rung, each with its crossed CI."""
    value: float
    utterances: int
    rate: float
    ci_low: float
    ci_high: float
    per_seed: list[float]
    ratio: float
    ratio_ci_low: float
    ratio_ci_high: float


@dataclass
class LabelLadder:
    label: str
    seeds: list
    runs: list[Path]
    plain: float = 1.0                     # the plain rung's value: tempo 1, or the runs' own hop
    rungs: dict[str, dict[float, RungResult]] = field(default_factory=dict)   # metric -> value -> result


def _aligned(records: list[dict], ids: list[str], where: str) -> dict[str, dict]:
    by_id = {r["id"]: r for r in records}
    if sorted(by_id) != sorted(ids) or len(by_id) != len(records):
        missing, extra = sorted(set(ids) - set(by_id)), sorted(set(by_id) - set(ids))
        raise RateLadderError(f"{where}: scored other utterances than the plain rung ({len(missing)} missing, "
                              f"{len(extra)} extra, e.g. {(missing + extra)[:3]}); a rate ladder compares the same "
                              "utterances at every rate: decode every rung on the same manifest")
    return by_id


def rate_ladder(paths: Iterable[str | os.PathLike], test_set: str, *, axis: str = "tempo",
                values: Sequence[float] | None = None, suffix: str = "", n_boot: int = 1000) -> list[LabelLadder]:
    """Read the rungs of every run under ``paths`` (module docstring); one `LabelLadder` per label.

    ``values``: the rungs (default: `default_values`, 0.8 ... 1.3 or 8 ... 12 ms); ``suffix``: the
    evaluation's own suffix (``eval.suffix``) before the rate's. A run lacking a rung is an error
    naming it: a ladder with a hole would read as complete."""
    _check_axis(axis)
    values = [float(v) for v in (values if values is not None else default_values(axis))]
    if not values:
        raise RateLadderError("a rate ladder needs at least one rung")
    runs, _ = load_runs(list(paths), result_name(test_set, suffix))   # the plain rung: labels, decoding
    by_label: dict[str, list] = {}
    for r in runs:
        by_label.setdefault(r.label, []).append(r)
    out = []
    for label, group in by_label.items():
        check_one_run_per_seed(label, group)
        group = sorted(group, key=lambda r: (str(r.seed), str(logical_path(r.run_dir))))
        plain = [read_records(result_dir(r.run_dir, test_set, suffix) / PER_UTT) for r in group]
        ids = [rec["id"] for rec in plain[0]]
        plain_by = [_aligned(recs, ids, f"{logical_path(r.run_dir)}/eval/{result_name(test_set, suffix)}")
                    for r, recs in zip(group, plain)]
        rung_by: dict[float, list[dict[str, dict]]] = {}
        for value in values:
            per_run = []
            for r in group:
                rate = rung_rate(axis, value, run_hop_ms(r.run_dir))
                name = result_name(test_set, suffix + rate.suffix)
                path = result_dir(r.run_dir, test_set, suffix + rate.suffix) / PER_UTT
                if not locate(path).is_file():
                    raise RateLadderError(
                        f"{logical_path(r.run_dir)}: no eval/{name}/{PER_UTT} (rung {axis}={value:g}); decode it: "
                        f"python scripts/evaluate_rates.py run={logical_path(r.run_dir)} axis={axis} "
                        f"rungs=[{','.join(f'{v:g}' for v in values)}] data.test={test_set}")
                per_run.append(_aligned(read_records(path), ids, f"{logical_path(r.run_dir)}/eval/{name}"))
            rung_by[value] = per_run
        plain_value = 1.0 if axis == "tempo" else run_hop_ms(group[0].run_dir)
        ladder = LabelLadder(label, [r.seed for r in group], [r.run_dir for r in group], plain_value)
        for metric, (num_key, den_key) in COUNTS.items():
            base_err = np.array([[float(p[u][num_key]) for u in ids] for p in plain_by])     # (S, R)
            ladder.rungs[metric] = {}
            for value, per_run in rung_by.items():
                err = np.array([[float(p[u][num_key]) for u in ids] for p in per_run])     # (S, R)
                den = np.array([[float(p[u][den_key]) for u in ids] for p in per_run])     # (S, R)
                rng_seed = zlib.crc32(f"{label}|{axis}|{value:g}|{metric}".encode())
                lo, hi = two_level_ratio_ci(err, den, n_boot=n_boot, seed=rng_seed)
                rlo, rhi = two_level_ratio_ci(err, base_err, n_boot=n_boot, seed=rng_seed)
                per_seed = [100.0 * e.sum() / d.sum() if d.sum() > 0 else math.nan for e, d in zip(err, den)]
                ladder.rungs[metric][value] = RungResult(
                    value, len(ids), 100.0 * err.sum() / den.sum() if den.sum() > 0 else math.nan,
                    100.0 * lo, 100.0 * hi, per_seed,
                    err.sum() / base_err.sum() if base_err.sum() > 0 else math.nan, rlo, rhi)
        out.append(ladder)
    return out


def _f(x: float, digits: int = 1) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _axis_name(axis: str) -> str:
    return "tempo (× as recorded)" if axis == "tempo" else "feature hop (ms)"


def rate_markdown(ladders: Sequence[LabelLadder], test_set: str, axis: str, caption: str | None = None) -> str:
    values = list(next(iter(ladders[0].rungs.values()))) if ladders else []
    n = ladders[0].rungs["wer"][values[0]].utterances if ladders and values else 0
    what = ("the audio time-stretched (`eval.tempo`, pitch kept; > 1 faster)" if axis == "tempo" else
            "the features computed with another hop (`eval.hop_ms`; a longer hop shows the model faster speech)")
    out = [f"# Error rate versus speaking rate — test set `{test_set}`, axis `{axis}`", "",
           *([caption, ""] if caption else []),
           f"The same {n} utterances at every rung, {what}. Cell: the rate pooled over the utterances and the "
           "seeds (%) [95 % crossed bootstrap: utterances resampled, one draw for every seed, then seeds]; with "
           "several seeds the per-seed rates follow in parentheses. Ratio: errors at the rung / errors of the same "
           "utterances at the plain rung (as recorded, the run's own hop), same crossed CI over the paired "
           "utterances.", ""]
    for metric in COUNTS:
        cols = [f"{axis}={v:g}" for v in values]
        out += [f"## {metric.upper()} (%)", "", "| label | seeds | " + " | ".join(cols) + " |",
                "| --- | --- |" + " ---: |" * len(cols)]
        for lad in ladders:
            cells = []
            for v in values:
                r = lad.rungs[metric][v]
                cell = f"{_f(r.rate)} [{_f(r.ci_low)}, {_f(r.ci_high)}]"
                if len(r.per_seed) > 1:
                    cell += " (" + ", ".join(_f(x) for x in r.per_seed) + ")"
                cells.append(cell)
            out.append(f"| {lad.label} | {', '.join(str(s) for s in lad.seeds)} | " + " | ".join(cells) + " |")
        out += ["", f"### {metric.upper()} ratio to the plain rung", "",
                "| label | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
        for lad in ladders:
            cells = [f"{_f(r.ratio, 2)}× [{_f(r.ratio_ci_low, 2)}, {_f(r.ratio_ci_high, 2)}]"
                     for r in (lad.rungs[metric][v] for v in values)]
            out.append(f"| {lad.label} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def rate_csv(ladders: Sequence[LabelLadder], test_set: str, axis: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_KEYS)
    for lad in ladders:
        for metric, rungs in lad.rungs.items():
            for v, r in rungs.items():
                w.writerow([lad.label, ";".join(str(s) for s in lad.seeds), test_set, axis, f"{v:g}", metric,
                            r.utterances, f"{r.rate:.4f}", f"{r.ci_low:.4f}", f"{r.ci_high:.4f}",
                            ";".join(f"{x:.4f}" for x in r.per_seed), f"{r.ratio:.4f}", f"{r.ratio_ci_low:.4f}",
                            f"{r.ratio_ci_high:.4f}"])
    return buf.getvalue()


def plot_rate_ladder(ladders: Sequence[LabelLadder], path: str | os.PathLike, *, test_set: str, axis: str,
                     metric: str = "wer", title: str | None = None, caption: str | None = None) -> None:
    """Two panels: the rate against the rung (band: crossed CI), and its ratio to the plain rung."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # no global backend switch
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.5, 4.2), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    ax_rate, ax_ratio = fig.subplots(1, 2, sharex=True)
    for i, lad in enumerate(ladders):
        color, ls = f"C{i % 10}", "-" if i < 10 else "--"
        rungs = lad.rungs[metric]
        x = np.array(list(rungs))
        for ax, keys in ((ax_rate, ("rate", "ci_low", "ci_high")), (ax_ratio, ("ratio", "ratio_ci_low", "ratio_ci_high"))):
            y, lo, hi = (np.array([getattr(r, k) for r in rungs.values()]) for k in keys)
            ax.plot(x, y, marker="o", ms=4, color=color, ls=ls, lw=1.6, label=f"{lad.label} ({len(lad.seeds)} seed"
                    f"{'s' if len(lad.seeds) > 1 else ''})")
            ok = ~(np.isnan(lo) | np.isnan(hi))
            ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.15, lw=0)
    for plain in sorted({lad.plain for lad in ladders}):   # as recorded / the runs' own hop
        for ax in (ax_rate, ax_ratio):
            ax.axvline(plain, color="0.3", ls=":", lw=1)
    for ax in (ax_rate, ax_ratio):
        ax.set_xlabel(_axis_name(axis))
        ax.grid(True, alpha=0.3)
    ax_rate.set_ylim(bottom=0)
    ax_rate.set_ylabel(f"{metric.upper()} (%)")
    ax_ratio.axhline(1.0, color="0.3", ls=":", lw=1)
    ax_ratio.set_ylabel(f"{metric.upper()} / {metric.upper()} at the plain rung")
    ax_ratio.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title or f"{metric.upper()} versus speaking rate — {test_set} (same utterances at every rung; "
                 "band: 95 % CI, utterances x seeds)", fontsize=10)
    add_caption(fig, caption)
    save_figure(fig, path)


def rate_report(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike, *, test_set: str,
                axis: str = "tempo", values: Sequence[float] | None = None, suffix: str = "",
                metric: str = "wer", n_boot: int = 1000, title: str | None = None,
                caption: str | None = None) -> dict[str, Path]:
    """Write ``rate_<axis>.{png,md,csv}`` into ``out_dir``; returns the paths. ``caption`` (e.g.
    `asr_pe.plots.cape_paper.caption`) goes under the figure's title and into the markdown."""
    if metric not in COUNTS:
        raise RateLadderError(f"metric {metric!r}: choose one of {tuple(COUNTS)}")
    ladders = rate_ladder(paths, test_set, axis=axis, values=values, suffix=suffix, n_boot=n_boot)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"rate_{axis}"
    files = {"png": out_dir / f"{stem}.png", "md": out_dir / f"{stem}.md", "csv": out_dir / f"{stem}.csv"}
    atomic_write_text(files["md"], rate_markdown(ladders, test_set, axis, caption))
    atomic_write_text(files["csv"], rate_csv(ladders, test_set, axis))
    plot_rate_ladder(ladders, files["png"], test_set=test_set, axis=axis, metric=metric, title=title, caption=caption)
    return files
