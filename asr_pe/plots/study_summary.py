"""The length study's summary tables, regenerated from archived run directories.

1. Accuracy: per label, first the in-context ratio (`asr_pe.plots.in_context_table`: the
   long-form recordings decoded whole over the same utterances decoded alone, seeds pooled, with
   its crossed 95 % CI (recordings x seeds); ``–`` where per-utterance scores or the long
   set's parts are missing), then CER at a few buckets of the short test set and on the long-form set,
   each as the seed mean with the per-seed values in parentheses; the cross-set degradation ratios
   (CER of a long bucket over the same label's CER in the reference bucket, both seed means,
   measured on different content; the long-form one with its 95 % bootstrap CI, `ratio_ci`, only
   where the runs have per-utterance scores and the parts are known, so that each recording is
   drawn together with the reference utterances inside it);
   WER at the reference bucket, the longest short bucket and long-form. Rows by reference CER.
2. Attention: per label, mean attended distance (seconds, and as a fraction of the utterance)
   and the share of attention within ±local_s, per duration bucket, from each run's
   ``attention_stats/attention_stats.csv`` (scripts/attention_vs_length.py), averaged over
   the utterances, layers and heads of a bucket and then over the label's runs.
3. Decodings: one row per label and decoding (a hybrid model decoded by attention, joint
   CTC/attention and CTC greedy gives three labels: ``rope/hybrid+attention`` …), every bucket
   of the sets that hold it with its bootstrap CI, and the long-form set's CER beside the
   decoding that has one (``longform_ctc`` beside ``test_ctc``: the same label).
4. Remedies (``remedy_table``): one row per PE and remedy (the plain model, each inference
   remedy ``eval/<set>_<remedy>``, chunked inference, each training remedy), CER [CI] at the
   reference bucket, a long bucket and on the long-form set, the long-form / reference ratio
   and the reference-bucket cost against the same PE's plain model.
5. Differences (``difference_table``): each label's CER minus a reference PE's of the same
   head, encoder and arm (``rope/ctc [conformer]`` against ``none/ctc [conformer]``), at the
   reference bucket and on the long-form set, with paired bootstrap CIs (`difference_ci`: one
   draw of utterances for every seed of both models). The seed spread cannot say whether two
   close models differ; the paired CI can, where they were scored on the same utterances.

All read what `plot_wer_vs_length` reads (run_info.json, eval/<set>/buckets.csv), through
the same loader, so the seed means here are the ones in its tables.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence

from asr_pe.errors import MissingFileError, NotDistributions
from asr_pe.evaluation.buckets import read_bucket_csv
from asr_pe.evaluation.length_ratio import difference_ci, length_ratio_ci
from asr_pe.results_table import locate
from asr_pe.run_folder import BUCKETS_CSV, BUCKETS_META, eval_dir, result_dir, run_label

from .in_context_table import in_context_cell, label_in_context
from .wer_vs_length import (
    ALL_LABEL, LabelSeries, RunResult, _eval_meta, aggregate, all_buckets, ci_cell, find_run_dirs, format_value,
    load_runs, read_run_info, seeds_cell,
)

ATTENTION_CSV = Path("attention_stats") / "attention_stats.csv"


def _cell(s: LabelSeries, bucket: str) -> str:
    """Seed mean, then the per-seed values when there are several: ``7.2 (6.9, 7.4)``."""
    if bucket not in s.value:
        return "–"
    text = format_value(s.value[bucket])
    if len(s.per_seed[bucket]) > 1:
        text += " (" + ", ".join(format_value(v) for v in s.per_seed[bucket]) + ")"
    return text


def _ratio(s: LabelSeries, bucket: str, ref: float) -> str:
    v = s.value.get(bucket, math.nan)
    return "–" if math.isnan(v) or not ref or math.isnan(ref) else f"{v / ref:.2f}×"


def ratio_ci(short: LabelSeries, long: LabelSeries, ref_bucket: str, long_bucket: str = ALL_LABEL, *,
             metric: str = "cer", n_boot: int = 1000, parts: dict | None = None) -> tuple[float, float] | None:
    """95 % bootstrap CI of one label's ``long_bucket`` (long set) / ``ref_bucket`` (short set) ratio
    of seed means, from its runs' per-utterance scores (`length_ratio_ci`, runs paired by
    directory; with ``parts`` each long recording is drawn together with the reference utterances
    inside it); None where a run has none (an archived remedy folder keeps bucket tables only)."""
    long_by_dir = {r.run_dir: r for r in long.runs}
    pairs = [(r, long_by_dir[r.run_dir]) for r in short.runs if r.run_dir in long_by_dir]
    if not pairs or n_boot <= 0:
        return None
    lo_long, hi_long = (0.0, math.inf) if long_bucket == ALL_LABEL else (long.lo[long_bucket], long.hi[long_bucket])
    return length_ratio_ci([result_dir(r.run_dir, r.test_set) for r, _ in pairs],
                           [result_dir(lr.run_dir, lr.test_set) for _, lr in pairs],
                           ref_lo=short.lo[ref_bucket], ref_hi=short.hi[ref_bucket],
                           long_lo=lo_long, long_hi=hi_long, metric=metric, n_boot=n_boot, parts=parts)


def _ratio_with_ci(short: LabelSeries, long: LabelSeries, ref_bucket: str, long_bucket: str,
                   parts: dict | None) -> str:
    """``6.31× [5.61, 7.10]``: the ratio of seed means with its bootstrap CI where per-utterance
    scores exist and the long set's parts are known (`ratio_ci` with ``parts``). Without parts
    there is no CI: the long set may be built from the short set, and drawing two overlapping
    sets as if they were independent gives no valid interval."""
    text = _ratio(long, long_bucket, short.value.get(ref_bucket, math.nan))
    ci = ratio_ci(short, long, ref_bucket, long_bucket, parts=parts) if text != "–" and parts else None
    return text if ci is None else f"{text} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _long_set_name(series: Iterable[LabelSeries], bucket: str, set_name: str) -> str:
    """A long-form set's column name: its mean duration to 10 s (``160 s``), else its set name."""
    durations = [d for s in series if not math.isnan(d := s.mean_duration.get(bucket, math.nan))]
    return f"{round(sum(durations) / len(durations), -1):.0f} s" if durations else set_name


def accuracy_table(paths: Iterable[str | os.PathLike], *, short_set: str, long_set: str,
                   buckets: Sequence[str], ref_bucket: str, long_bucket: str = ALL_LABEL,
                   parts_path: str | os.PathLike | None = None) -> str:
    """Markdown table (see the module docstring). ``buckets`` are buckets of ``short_set``;
    ``ref_bucket`` must be one of them; ``long_bucket`` is the long-form set's bucket.
    ``parts_path``: the long set's parts (else the manifest each run's evaluation names), for the
    in-context column and the cross-set ratio's CI."""
    if ref_bucket not in buckets:
        raise ValueError(f"reference bucket {ref_bucket!r} must be one of the buckets {list(buckets)}")
    paths = list(paths)
    short_runs, _ = load_runs(paths, short_set)
    long_runs, _ = load_runs(paths, long_set)
    cer = {s.label: s for s in aggregate(short_runs, "cer")}
    wer = {s.label: s for s in aggregate(short_runs, "wer")}
    long_cer = {s.label: s for s in aggregate(long_runs, "cer")}
    long_wer = {s.label: s for s in aggregate(long_runs, "wer")}
    long_name = _long_set_name(long_cer.values(), long_bucket, long_set)
    in_context = label_in_context(paths, long_set=long_set, alone_set=short_set, parts_path=parts_path)
    last = buckets[-1]
    head = (["PE", "seeds", f"in-context {long_name} [95 % CI]"] + [f"CER {b} s" for b in buckets] + [f"CER {long_name}"]
            + [f"{last} / {ref_bucket}", f"{long_name} / {ref_bucket}"]
            + [f"WER {ref_bucket} s", f"WER {last} s", f"WER {long_name}"])
    lines = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
    order = sorted(cer, key=lambda label: cer[label].value.get(ref_bucket, math.inf))
    for label in order:
        s, lc = cer[label], long_cer.get(label)
        ref = s.value.get(ref_bucket, math.nan)
        seeds = seeds_cell(s.seeds)
        ic = in_context.get(label)
        row = [label.removesuffix("/ctc"), seeds, in_context_cell(ic)] + [_cell(s, b) for b in buckets]
        row += [_cell(lc, long_bucket) if lc else "–"]
        row += [_ratio(s, last, ref),
                _ratio_with_ci(s, lc, ref_bucket, long_bucket, ic.parts if ic else None) if lc else "–"]
        row += [format_value(wer[label].value.get(ref_bucket, math.nan)), format_value(wer[label].value.get(last, math.nan)),
                format_value(long_wer[label].value.get(long_bucket, math.nan)) if label in long_wer else "–"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def read_attention_stats(run_dir: Path) -> dict[str, dict[str, float]]:
    """bucket -> mean distance (s), mean distance / duration, local share, over the run's rows
    (`NotDistributions` when a row's share lies outside [0, 1])."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    path = locate(Path(run_dir) / ATTENTION_CSV)
    with open(path, newline="") as f:
        for line_no, row in enumerate(csv.DictReader(f), start=2):
            try:
                dist, dur, local = float(row["mean_distance_s"]), float(row["duration"]), float(row["local_mass"])
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{path}:{line_no}: bad attention_stats row ({e})") from None
            if not -1e-6 <= local <= 1 + 1e-6:
                raise NotDistributions(f"{path}:{line_no}: a share of attention of {local:.3f}: the weights of "
                                       "layer {layer}, head {head} are not distributions".format(**row))
            acc = sums[row["bucket"]]
            acc[0] += dist
            acc[1] += dist / dur
            acc[2] += local
            acc[3] += 1
    return {b: {"distance_s": a[0] / a[3], "distance_frac": a[1] / a[3], "local": a[2] / a[3]}
            for b, a in sums.items()}


def _distance_cell(seconds: float, fraction: float) -> str:
    """``2.65 s (0.05)``: mean attended distance and its share of the utterance; ``–`` without data."""
    return "–" if math.isnan(seconds) else f"{format_value(seconds, 2)} s ({format_value(fraction, 2)})"


def attention_table(paths: Iterable[str | os.PathLike], *, buckets: Sequence[str],
                    bucket_names: Sequence[str] | None = None) -> str:
    """Markdown table of attended distance and local share per bucket; rows by distance in the
    first bucket. Runs of one label (seeds) are averaged. Runs without attention stats are left out,
    and so are runs whose statistics are not of distributions (named under the table)."""
    names = list(bucket_names or [f"{b} s" for b in buckets])
    if len(names) != len(buckets):
        raise ValueError(f"{len(names)} bucket names for {len(buckets)} buckets")
    per_label: dict[str, list[dict]] = defaultdict(list)
    left_out: dict[str, str] = {}
    for run_dir in find_run_dirs(paths):
        if (run_dir / ATTENTION_CSV).is_file():
            label = run_label(read_run_info(run_dir))
            try:
                stats = read_attention_stats(run_dir)
            except NotDistributions as e:
                left_out.setdefault(label.removesuffix("/ctc"), str(e).split(": ", 1)[1])
                continue
            per_label[label].append(stats)
    if not per_label:
        raise MissingFileError(f"no run under the given paths has {ATTENTION_CSV}")

    def mean(label: str, bucket: str, key: str) -> float:
        vals = [st[bucket][key] for st in per_label[label] if bucket in st]
        return sum(vals) / len(vals) if vals else math.nan

    head = ["PE"] + [f"distance {n}" for n in names] + [f"local {n}" for n in names]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for label in sorted(per_label, key=lambda lb: mean(lb, buckets[0], "distance_s")):
        row = [label.removesuffix("/ctc")]
        row += [_distance_cell(mean(label, b, "distance_s"), mean(label, b, "distance_frac")) for b in buckets]
        row += [format_value(mean(label, b, "local"), 2) for b in buckets]
        lines.append("| " + " | ".join(row) + " |")
    if left_out:
        lines += ["", "Left out: " + "; ".join(f"{label} ({why})" for label, why in sorted(left_out.items()))]
    return "\n".join(lines) + "\n"


def decodings_table(paths: Iterable[str | os.PathLike], *, sets: Sequence[str], long_set: str | None = None,
                    long_bucket: str = ALL_LABEL, metric: str = "cer") -> str:
    """Markdown table: one row per label (PE, head and decoding) of each of ``sets``, columns the
    buckets of those sets in duration order, then ``long_set``'s ``long_bucket`` for the rows
    whose label it holds (the same model decoded the same way).

    Rows are grouped by PE (in the order the PEs first appear) and, within a PE, in the order of
    ``sets``; the ``set`` column names where each row's numbers come from."""
    paths = list(paths)
    rows: list[tuple[str, LabelSeries]] = []
    for name in sets:
        runs, _ = load_runs(paths, name)
        rows += [(name, s) for s in aggregate(runs, metric)]
    long: dict[str, LabelSeries] = {}
    if long_set:
        long_runs, _ = load_runs(paths, long_set)
        long = {s.label: s for s in aggregate(long_runs, metric)}
    cols = [b for b in all_buckets([s for _, s in rows]) if b != ALL_LABEL]
    long_name = _long_set_name(long.values(), long_bucket, long_set or "")

    def pe(s: LabelSeries) -> str:
        return str(s.runs[0].info.get("pe", "?"))

    pe_order = list(dict.fromkeys(pe(s) for _, s in rows))
    rows.sort(key=lambda item: pe_order.index(pe(item[1])))        # stable: sets keep their order
    head = ["label", "set", "seeds"] + [f"{b} s" for b in cols] + ([long_name] if long_set else [])
    lines = ["| " + " | ".join(head) + " |", "| --- | --- | --- |" + " ---: |" * (len(head) - 3)]
    for name, s in rows:
        row = [s.label, name, seeds_cell(s.seeds)] + [ci_cell(s, b) for b in cols]
        if long_set:
            row.append(ci_cell(long[s.label], long_bucket) if s.label in long else "–")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _same_group(label: str) -> str:
    """The label without its PE: ``rope/ctc [conformer]`` -> ``ctc [conformer]``."""
    return label.partition("/")[2]


def _difference_cell(a: LabelSeries, b: LabelSeries, bucket: str, metric: str, n_boot: int) -> str:
    """``+0.92 [+0.76, +1.08]``: A's seed-mean rate minus B's in ``bucket`` (points), paired CI."""
    if bucket not in a.value or bucket not in b.value:
        return "–"
    lo, hi = (0.0, math.inf) if bucket == ALL_LABEL else (a.lo[bucket], a.hi[bucket])
    d = difference_ci([result_dir(r.run_dir, r.test_set) for r in a.runs],
                      [result_dir(r.run_dir, r.test_set) for r in b.runs],
                      lo=lo, hi=hi, metric=metric, n_boot=n_boot)
    if d is None:        # no per-utterance scores, or different utterances: the plain difference
        return f"{a.value[bucket] - b.value[bucket]:+.2f}"
    return f"{d[0]:+.2f} [{d[1]:+.2f}, {d[2]:+.2f}]"


def difference_table(paths: Iterable[str | os.PathLike], *, reference_pe: str, short_set: str,
                     long_set: str, ref_bucket: str, long_bucket: str = ALL_LABEL,
                     metric: str = "cer", n_boot: int = 1000) -> str:
    """Markdown table: per label with a ``reference_pe`` label of the same head, encoder and arm,
    the CER difference (points) to it at ``ref_bucket`` of ``short_set`` and on ``long_set``,
    each with its paired 95 % bootstrap CI (see the module docstring)."""
    paths = list(paths)
    short = {s.label: s for s in aggregate(load_runs(paths, short_set)[0], metric)}
    long = {s.label: s for s in aggregate(load_runs(paths, long_set)[0], metric)}

    def pe(s: LabelSeries) -> str:
        return str(s.runs[0].info.get("pe", "?"))

    refs = {_same_group(label): s for label, s in short.items() if pe(s) == reference_pe}
    if not refs:
        raise ValueError(f"no runs of the reference PE {reference_pe!r} under the given paths")
    long_name = _long_set_name(long.values(), long_bucket, long_set)
    head = ["PE", "reference", f"{metric.upper()} {ref_bucket} s: difference [95 % CI]",
            f"{metric.upper()} {long_name}: difference [95 % CI]"]
    lines = ["| " + " | ".join(head) + " |", "| --- | --- | ---: | ---: |"]
    for label in sorted(short, key=lambda lb: (_same_group(lb), short[lb].value.get(ref_bucket, math.inf))):
        ref = refs.get(_same_group(label))
        if ref is None or ref.label == label:
            continue
        row = [label.removesuffix("/ctc"), ref.label.removesuffix("/ctc"),
               _difference_cell(short[label], ref, ref_bucket, metric, n_boot)]
        lr, lref = long.get(label), long.get(ref.label)
        row.append(_difference_cell(lr, lref, long_bucket, metric, n_boot) if lr and lref else "–")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _remedy_results(run_dir: Path, short_set: str, long_set: str) -> list[tuple[str, RunResult, RunResult | None]]:
    """(remedy, short-set result, long-form result or None) for every decoding of a run: the
    plain ``eval/<short_set>`` and each ``eval/<short_set><suffix>`` (an inference remedy, or
    chunked inference: ``chunked``), with the run's training remedy in front."""
    info = read_run_info(run_dir)
    out = []
    for folder in sorted(eval_dir(run_dir).glob(f"{short_set}*/{BUCKETS_CSV}")):
        suffix = folder.parent.name[len(short_set):]
        if suffix and not suffix.startswith("_"):
            continue  # another set whose name starts alike (test_long...)
        results = []
        for name in (short_set, long_set):
            path = result_dir(run_dir, name, suffix) / BUCKETS_CSV
            if not path.is_file():
                results.append(None)
                continue
            decode, remedy = _eval_meta(path)
            meta_path = path.with_name(BUCKETS_META)
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
            if meta.get("mode") == "chunked":
                remedy = "+".join(r for r in (remedy, f"chunked:{meta.get('chunk_s', 0):g}") if r)
            results.append(RunResult(run_dir, info, f"{name}{suffix}", read_bucket_csv(path), decode, remedy))
        short, long = results
        if short is not None:
            out.append((short.remedy, short, long))
    return out


def _per_seed(s: LabelSeries, bucket: str) -> dict:
    """seed -> the mean value in ``bucket`` of the label's runs of that seed (absent ones left out)."""
    values = defaultdict(list)
    for r, v in zip(s.runs, s.per_seed.get(bucket, [])):
        if not math.isnan(v):
            values[r.seed].append(v)
    return {seed: sum(vs) / len(vs) for seed, vs in values.items()}


def remedy_table(paths: Iterable[str | os.PathLike], *, short_set: str = "test", long_set: str = "longform",
                 buckets: Sequence[str] = ("2-4", "32-64"), ref_bucket: str = "2-4",
                 long_bucket: str = ALL_LABEL) -> str:
    """Markdown table: per PE (its arm, encoder) and remedy, seeds pooled, CER [mean CI] at
    ``buckets`` of the short set and on the long-form set, the long-form / ``ref_bucket`` ratio,
    and the ``ref_bucket`` cost (points) against the same PE's plain model of the same seeds
    (the mean over the seeds that have both). Rows by PE, then
    by long-form CER."""
    if ref_bucket not in buckets:
        raise ValueError(f"reference bucket {ref_bucket!r} must be one of the buckets {list(buckets)}")
    groups: dict[tuple[str, str], list[tuple[RunResult, RunResult | None]]] = defaultdict(list)
    for run_dir in find_run_dirs(paths):
        info = read_run_info(run_dir)
        pe = f"{info.get('pe', '?')}/{info.get('loss', '?')}" + (f" [{info['arm']}]" if info.get("arm") else "")
        if info.get("encoder") not in (None, "transformer"):
            pe += f" {info['encoder']}"
        for remedy, short, long in _remedy_results(run_dir, short_set, long_set):
            groups[(pe, remedy)].append((short, long))
    if not groups:
        raise MissingFileError(f"no run under the given paths has eval/{short_set}/buckets.csv")

    def series(results: list[RunResult]) -> LabelSeries:
        return aggregate([RunResult(r.run_dir, r.info, r.test_set, r.rows) for r in results], "cer")[0]

    rows = []
    for (pe, remedy), pairs in groups.items():
        s = series([p[0] for p in pairs])
        longs = [p[1] for p in pairs if p[1] is not None]
        lc = series(longs) if longs else None
        rows.append((pe, remedy, s, lc))
    # the plain model's reference-bucket value per seed, so that a remedy's cost compares the same
    # seeds (a remedy evaluated on seed 0 only is not set against the mean of seeds 0 and 1; a
    # training remedy's run of seed k against the plain run of seed k)
    plain_by_seed = {pe: _per_seed(s, ref_bucket) for pe, remedy, s, _ in rows if remedy == ""}
    long_name = _long_set_name([lc for *_, lc in rows if lc is not None], long_bucket, long_set)
    head = (["PE", "remedy", "seeds"] + [f"CER {b} s" for b in buckets] + [f"CER {long_name}"]
            + [f"{long_name} / {ref_bucket}", f"cost at {ref_bucket} (points)"])
    lines = ["| " + " | ".join(head) + " |", "| --- | --- | --- |" + " ---: |" * (len(head) - 3)]

    def long_value(lc):
        return lc.value.get(long_bucket, math.inf) if lc is not None else math.inf

    for pe, remedy, s, lc in sorted(rows, key=lambda r: (r[0], long_value(r[3]))):
        ref = s.value.get(ref_bucket, math.nan)
        mine, plain = _per_seed(s, ref_bucket), plain_by_seed.get(pe, {})
        shared = [d for d in mine if d in plain]
        cost = sum(mine[d] - plain[d] for d in shared) / len(shared) if shared else math.nan
        row = [pe.removesuffix("/ctc").replace("/ctc ", " "), remedy or "(none)", seeds_cell(s.seeds)]
        row += [ci_cell(s, b) for b in buckets] + [ci_cell(lc, long_bucket) if lc else "–"]
        row += [_ratio(lc, long_bucket, ref) if lc else "–", "–" if math.isnan(cost) else f"{cost:+.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
