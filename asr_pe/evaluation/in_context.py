"""In-context ratio: a long recording decoded whole against the same utterances decoded alone.

Why: a ratio of a long-form set's CER over a short bucket's CER divides error rates measured on
different content (and, where the long recordings are built from the short set, resamples two
overlapping sets as if they were independent). The in-context ratio holds the content fixed: a
long-form recording is made of source utterances (its ``parts``, `asr_pe.data.manifest.Part`)
that were also decoded one by one, so both rates are measured on the same words.

Per recording r (its parts p = 1..n_r, each decoded alone):

    ref_r      = the recording's reference (normalised, `scoring.normalize_text`); it must equal
                 the parts' references joined with single spaces, else the content differs and
                 it is an error
    whole_r    = character (word) edits of the recording's hypothesis against ref_r
    alone_r    = edits of the parts' own hypotheses, joined with single spaces, against ref_r
    chars_r    = characters of ref_r (spaces counted, as everywhere in the project; words for WER)

so both rates of a recording share the denominator chars_r, and the pooled ratio is

    ratio = (Σ_r whole_r / Σ_r chars_r) / (Σ_r alone_r / Σ_r chars_r) = Σ_r whole_r / Σ_r alone_r.

CI (`paired_ratio_ci`): a percentile bootstrap over recordings, each draw resampling recordings
with replacement and keeping each recording's (whole, alone) pair together (paired).

Crossed CI (`two_level_ratio_ci`: recordings crossed with seeds, not nested), for several training
seeds scored on the same recordings:
num, den are (S, R) arrays (seed s, recording r) and the statistic is Σ_s Σ_r num / Σ_s Σ_r den
(the ratio of the seed-mean rates when the denominators are characters, or of seed-mean errors).
Each draw b

    1. resamples recordings: indices i_b (R,) with replacement, one draw for every seed (the
       seeds decoded the same recordings, so the recordings are crossed with the seeds);
    2. resamples seeds: indices j_b (S,) with replacement;
    3. statistic_b = Σ_{s in j_b} Σ_{r in i_b} num[s, r] / Σ_{s in j_b} Σ_{r in i_b} den[s, r].

Its properties, which tests/evaluation/test_in_context.py checks: with one seed it is the
one-level CI exactly (the recording draws come first from the same generator); seeds that are
identical add no width (step 2 then changes nothing); a spread between seeds widens it. The
same function gives the crossed CI of a pooled error rate (num = errors, den = reference
characters per utterance).

`in_context` takes the per-utterance records that `evaluate.py` writes (``per_utt.jsonl``:
``id``, ``duration``, ``ref``, ``hyp``; `asr_pe.evaluation.scoring.score_record`), so any system
whose output can be written as such records can be scored. Around it: `read_parts` /
`parts_of_set` find a long set's parts (its manifest's ``parts``, the builder's ``sources.json``
or an archived parts file), `set_in_context` scores two evaluated set folders, and
`in_context_pairs` + `write_in_context` are what `evaluate.py` runs after decoding a long set
together with the set holding its parts (``eval/<long set>/in_context.{json,md}``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from asr_pe.errors import MissingFileError, UserError
from asr_pe.evaluation.buckets import percentile_ci
from asr_pe.evaluation.scoring import edit_distances, normalize_text
from asr_pe.io import atomic_write_json, atomic_write_text, read_jsonl
from asr_pe.results_table import locate
from asr_pe.run_folder import BUCKETS_META, PER_UTT

__all__ = ["InContextError", "check_metric", "RecordingRow", "InContextResult", "in_context", "paired_ratio_ci",
           "two_level_ratio_ci", "pooled_in_context", "read_parts", "read_records", "METRICS",
           "parts_of_set", "set_in_context", "write_in_context", "in_context_pairs", "result_markdown",
           "number"]

# metric -> (edit-count key, reference-length key) of `score_utterance` and `edit_distances`
METRICS = {"cer": ("char_errors", "ref_chars"), "wer": ("errors", "ref_words")}
_MAX_ELEMENTS = 4_000_000      # draws x recordings per chunk of the bootstrap


class InContextError(UserError, ValueError):
    """The long set, its parts and the alone records do not fit together (named in the message)."""


def check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")


@dataclass(frozen=True)
class RecordingRow:
    """One recording: its length, parts and the edit counts of both decodings (see the module)."""
    id: str
    duration: float
    parts: int
    ref_chars: int
    whole_char_errors: int
    alone_char_errors: int
    ref_words: int
    whole_word_errors: int
    alone_word_errors: int

    def counts(self, metric: str) -> tuple[int, int, int]:
        """(whole errors, alone errors, reference length) of ``metric``."""
        check_metric(metric)
        unit = "char" if metric == "cer" else "word"
        return (getattr(self, f"whole_{unit}_errors"), getattr(self, f"alone_{unit}_errors"),
                getattr(self, f"ref_{unit}s"))

    def ratio(self, metric: str = "cer") -> float:
        whole, alone, _ = self.counts(metric)
        return whole / alone if alone else math.nan


@dataclass(frozen=True)
class InContextResult:
    """Pooled rates (%), the in-context ratio, its paired bootstrap CI and the per-recording rows."""
    metric: str
    rows: tuple[RecordingRow, ...]
    whole: float            # pooled rate of the recordings decoded whole, %
    alone: float            # pooled rate of the same utterances decoded alone, %
    ratio: float            # whole / alone (nan when no part has an error alone)
    ci_low: float
    ci_high: float
    n_boot: int
    extra: dict = field(default_factory=dict)


def _result(metric: str, rows: Sequence[RecordingRow], counts: np.ndarray, lo: float, hi: float, n_boot: int,
            **extra) -> InContextResult:
    """The pooled rates and ratio of ``counts`` (..., 3: whole, alone, reference length)."""
    whole, alone, ref = counts[..., 0].sum(), counts[..., 1].sum(), counts[..., 2].sum()
    return InContextResult(metric=metric, rows=tuple(rows), whole=100 * whole / ref if ref else math.nan,
                           alone=100 * alone / ref if ref else math.nan,
                           ratio=whole / alone if alone else math.nan, ci_low=lo, ci_high=hi, n_boot=n_boot,
                           extra=extra)


def _record_map(records: Iterable[Mapping] | Mapping[str, Mapping], what: str) -> dict[str, Mapping]:
    if isinstance(records, Mapping):
        return dict(records)
    out: dict[str, Mapping] = {}
    for rec in records:
        rid = str(rec["id"])
        if rid in out:
            raise InContextError(f"{what}: id {rid!r} appears twice")
        out[rid] = rec
    return out


def _part_ids(value: Any, rid: str) -> list[str]:
    """A recording's parts as source ids: ids, `Part`s or ``{"id", ...}`` mappings."""
    if value is None or isinstance(value, (str, bytes)) or not len(value):
        raise InContextError(f"recording {rid!r} has no parts")
    return [str(p if isinstance(p, str) else (p["id"] if isinstance(p, Mapping) else p.id)) for p in value]


def in_context(long_records: Iterable[Mapping], parts: Mapping[str, Sequence],
               alone_records: Iterable[Mapping] | Mapping[str, Mapping], *, metric: str = "cer",
               n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> InContextResult:
    """The in-context ratio of one system (see the module docstring).

    ``long_records``: per-utterance records (``id``, ``duration``, ``ref``, ``hyp``) of the
    long recordings decoded whole; ``parts``: recording id -> its source utterances in order
    (ids, `Part`s or ``{"id", "start", "end"}`` mappings); ``alone_records``: the records of the
    source utterances decoded alone (an iterable, or a mapping by id; extra ones are ignored).
    Every long record needs parts, every part an alone record, and the parts' references must
    make the recording's: otherwise `InContextError` naming the recording. Returns pooled rates
    (%), the ratio whole / alone with a ``ci`` percentile-bootstrap CI over recordings
    (``n_boot`` draws, generator seeded with ``seed``; `paired_ratio_ci`) and one row per
    recording (in the order of ``long_records``).
    """
    check_metric(metric)
    alone = _record_map(alone_records, "alone records")
    rows: list[RecordingRow] = []
    seen: set[str] = set()
    for rec in long_records:
        rid = str(rec["id"])
        if rid in seen:
            raise InContextError(f"long set: recording id {rid!r} appears twice")
        seen.add(rid)
        if rid not in parts:
            raise InContextError(f"recording {rid!r} has no parts listed (is the parts file that of "
                                 f"this long-form set?)")
        ids = _part_ids(parts[rid], rid)
        missing = [i for i in ids if i not in alone]
        if missing:
            raise InContextError(f"recording {rid!r}: {len(missing)} of its {len(ids)} parts were not "
                                 f"decoded alone (first: {missing[0]!r}); evaluate the source set too")
        ref = normalize_text(rec["ref"])
        joined_ref = normalize_text(" ".join(alone[i]["ref"] for i in ids))
        if joined_ref != ref:
            raise InContextError(f"recording {rid!r}: its reference is not its parts' references joined "
                                 f"in order, so the two decodings would be scored on different content")
        whole = edit_distances(ref, rec["hyp"])
        apart = edit_distances(ref, " ".join(str(alone[i]["hyp"]) for i in ids))
        rows.append(RecordingRow(id=rid, duration=float(rec["duration"]), parts=len(ids),
                                 ref_chars=whole["ref_chars"], whole_char_errors=whole["char_errors"],
                                 alone_char_errors=apart["char_errors"], ref_words=whole["ref_words"],
                                 whole_word_errors=whole["errors"], alone_word_errors=apart["errors"]))
    if not rows:
        raise InContextError("the long set holds no recordings")
    counts = np.array([r.counts(metric) for r in rows], dtype=float)      # (R, 3): whole, alone, ref
    lo, hi = paired_ratio_ci(counts[:, 0], counts[:, 1], n_boot=n_boot, seed=seed, ci=ci)
    return _result(metric, rows, counts, lo, hi, n_boot)


def two_level_ratio_ci(num, den, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
                       ) -> tuple[float, float]:
    """Percentile-bootstrap CI of Σ num / Σ den, resampling recordings, then seeds.

    ``num``, ``den``: (S, R) arrays, seed s and recording (or utterance) r; every seed has the
    same R recordings in the same order. See the module docstring for the draws and their
    properties. Draws whose denominator is 0 are left out; (nan, nan) when none is left.
    """
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    num, den = np.atleast_2d(np.asarray(num, dtype=float)), np.atleast_2d(np.asarray(den, dtype=float))
    if num.shape != den.shape or num.ndim != 2 or num.shape[1] == 0:
        raise ValueError(f"num and den must be (seeds, recordings) arrays of one shape, got "
                         f"{num.shape} and {den.shape}")
    n_seeds, n_rec = num.shape
    rng = np.random.default_rng(seed)
    # 1. recordings: one draw of indices for every seed; per draw and seed the summed counts
    num_sum = np.empty((n_seeds, n_boot))
    den_sum = np.empty((n_seeds, n_boot))
    step = max(1, _MAX_ELEMENTS // (n_rec * n_seeds))
    for start in range(0, n_boot, step):
        stop = min(n_boot, start + step)
        idx = rng.integers(0, n_rec, size=(stop - start, n_rec))          # (draws, R)
        num_sum[:, start:stop] = num[:, idx].sum(axis=2)                 # (S, draws)
        den_sum[:, start:stop] = den[:, idx].sum(axis=2)
    # 2. seeds: how often each seed is drawn, per draw
    seed_idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))          # (draws, S)
    weight = np.zeros((n_boot, n_seeds))
    np.add.at(weight, (np.repeat(np.arange(n_boot), n_seeds), seed_idx.reshape(-1)), 1.0)
    top = (weight * num_sum.T).sum(axis=1)                               # (draws,)
    bottom = (weight * den_sum.T).sum(axis=1)
    ok = bottom > 0
    return percentile_ci(top[ok] / bottom[ok], ci) if ok.any() else (math.nan, math.nan)


def paired_ratio_ci(num, den, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
                    ) -> tuple[float, float]:
    """Percentile-bootstrap CI of Σ num / Σ den over recordings resampled with replacement, each
    recording's (num, den) kept together: `two_level_ratio_ci` with one seed."""
    return two_level_ratio_ci(np.asarray(num, dtype=float)[None], np.asarray(den, dtype=float)[None],
                              n_boot=n_boot, seed=seed, ci=ci)


def pooled_in_context(results: Sequence[InContextResult], *, n_boot: int = 1000, seed: int = 0,
                      ci: float = 0.95) -> InContextResult:
    """Several seeds of one system on the same recordings: pooled rates (seed means), the ratio
    Σ_s Σ_r whole / Σ_s Σ_r alone and its crossed CI (one draw of recordings for every seed, and a draw
    of seeds; with two seeds it covers the recordings for two fixed models). The rows are
    the seeds' rows summed per recording. An error when the seeds' recordings differ."""
    if not results:
        raise ValueError("no results to pool")
    metric = results[0].metric
    ids = [r.id for r in results[0].rows]
    for res in results[1:]:
        if res.metric != metric or [r.id for r in res.rows] != ids:
            raise InContextError("the seeds were scored on different recordings (or metrics): "
                                 "no two-level bootstrap over them")
    counts = np.array([[r.counts(metric) for r in res.rows] for res in results], dtype=float)   # (S, R, 3)
    lo, hi = two_level_ratio_ci(counts[..., 0], counts[..., 1], n_boot=n_boot, seed=seed, ci=ci)
    errors = [f"{side}_{unit}_errors" for side in ("whole", "alone") for unit in ("char", "word")]
    rows = [RecordingRow(id=r.id, duration=r.duration, parts=r.parts, ref_chars=r.ref_chars * len(results),
                         ref_words=r.ref_words * len(results),
                         **{f: sum(getattr(res.rows[k], f) for res in results) for f in errors})
            for k, r in enumerate(results[0].rows)]
    return _result(metric, rows, counts, lo, hi, n_boot, seeds=len(results))


def number(x: float) -> float | None:
    """A number for JSON, which has no NaN: an absent one is null."""
    return None if math.isnan(x) else float(x)


def read_records(path: str | os.PathLike) -> list[dict]:
    """The records of a ``per_utt.jsonl`` (``id``, ``duration``, ``ref``, ``hyp`` needed); a bad
    line is an `InContextError` naming the file and line."""
    path = locate(path)
    if not path.is_file():
        raise MissingFileError(f"per-utterance records not found: {path}")
    out = []
    for lineno, rec in read_jsonl(path, InContextError):
        if not all(k in rec for k in ("id", "duration", "ref", "hyp")):
            raise InContextError(f"{path}:{lineno}: not a per-utterance record (needs id, duration, ref and hyp)")
        out.append(rec)
    return out


def read_parts(path: str | os.PathLike) -> dict[str, list[str]]:
    """Recording id -> its source ids, from a long-form manifest whose rows carry ``parts``
    (``.jsonl``), or a JSON mapping id -> list of ids or of ``{"id", "start", "end"}`` (the
    builders' ``sources.json``, or an archived parts file). Errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"parts file not found: {path}")
    out: dict[str, list[str]] = {}
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    rid, parts = str(row["id"]), row.get("parts")
                    if parts is None:
                        raise KeyError("parts")
                    out[rid] = _part_ids(parts, rid)
                except (ValueError, KeyError, TypeError) as e:
                    raise InContextError(f"{path}:{lineno}: a long-form row needs an id and its parts ({e}); "
                                         f"rebuild the set with the current builder") from None
        return out
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("expected a JSON object id -> parts")
        for rid, parts in data.items():
            out[str(rid)] = _part_ids(parts, str(rid))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InContextError(f"{path}: not a parts file ({e})") from None
    return out


def parts_of_set(long_dir: str | os.PathLike, parts_path: str | os.PathLike | None = None
                 ) -> dict[str, list[str]] | None:
    """The parts of an evaluated long set ``long_dir`` (``run/eval/<set>``): from ``parts_path``
    when given, else from the manifest its ``buckets.meta.json`` names (rows with ``parts``, or
    the builder's ``sources.json`` beside it); None when neither can be found (e.g. an archived
    run whose manifest lives in another machine's cache)."""
    if parts_path is not None:
        return read_parts(parts_path)
    meta = locate(Path(long_dir) / BUCKETS_META)
    try:
        manifest = Path(json.loads(meta.read_text(encoding="utf-8"))["manifest"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if manifest.is_file():
        try:
            return read_parts(manifest)
        except InContextError:
            pass                            # an older build without parts: its sources.json
    sources = manifest.parent / "sources.json"
    return read_parts(sources) if sources.is_file() else None


def set_in_context(long_dir: str | os.PathLike, alone_dir: str | os.PathLike, parts: Mapping[str, Sequence],
                   **kwargs) -> InContextResult:
    """`in_context` of two evaluated sets of one run: ``long_dir`` (the recordings decoded whole)
    and ``alone_dir`` (their source utterances decoded alone), each holding ``per_utt.jsonl``."""
    return in_context(read_records(Path(long_dir) / PER_UTT), parts,
                      read_records(Path(alone_dir) / PER_UTT), **kwargs)


def result_markdown(res: InContextResult) -> str:
    """A pooled line and one row per recording (markdown)."""
    m = res.metric.upper()
    ci = "" if math.isnan(res.ci_low) else f" [{res.ci_low:.2f}, {res.ci_high:.2f}]"
    lines = [f"In-context ratio: {res.ratio:.2f}×{ci} (95 % CI over recordings); {m} whole {res.whole:.2f} %, "
             f"the same utterances alone {res.alone:.2f} %, {len(res.rows)} recordings.", "",
             f"| recording | s | parts | {m} whole | {m} alone | ratio |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in res.rows:
        whole, alone, ref = r.counts(res.metric)
        lines.append(f"| {r.id} | {r.duration:.1f} | {r.parts} | {100 * whole / ref:.2f} | {100 * alone / ref:.2f} | "
                     + ("–" if math.isnan(r.ratio(res.metric)) else f"{r.ratio(res.metric):.2f}") + " |")
    return "\n".join(lines) + "\n"


def write_in_context(long_dir: str | os.PathLike, alone_dir: str | os.PathLike, parts: Mapping[str, Sequence],
                     *, alone_set: str, n_boot: int = 1000,
                     inputs: Mapping[str, Any] | None = None) -> InContextResult:
    """`set_in_context` of two evaluated sets, written beside the long set's results:
    ``in_context.json`` (pooled numbers, the alone set's name, per-recording counts, and
    ``inputs``: result folder name -> the identity of the result it was computed from,
    `asr_pe.evaluation.pipeline.result_identity`) and ``in_context.md``, atomically."""
    res = set_in_context(long_dir, alone_dir, parts, n_boot=n_boot)
    long_dir = Path(long_dir)
    atomic_write_json(long_dir / "in_context.json", {
        "alone_set": alone_set, "metric": res.metric, "whole": number(res.whole), "alone": number(res.alone),
        "ratio": number(res.ratio), "ci_low": number(res.ci_low), "ci_high": number(res.ci_high),
        "n_boot": res.n_boot, **({"inputs": dict(inputs)} if inputs else {}),
        "rows": [r.__dict__ for r in res.rows]}, indent=1)
    atomic_write_text(long_dir / "in_context.md", result_markdown(res))
    return res


def in_context_pairs(sets: Mapping[str, Sequence], manifests: Mapping[str, str | os.PathLike] | None = None
                     ) -> dict[str, tuple[str, dict[str, list[str]]]]:
    """Long set name -> (the name of another set holding every one of its parts, the parts), for
    the sets (name -> utterances) evaluated together. A set's parts are its utterances' ``parts``,
    or else the builder's ``sources.json`` beside its manifest (``manifests``: name -> path; sets
    built before manifests carried parts); sets without parts, or whose parts no other set
    holds, are left out."""
    ids = {name: {u.id for u in utts} for name, utts in sets.items()}
    pairs = {}
    for name, utts in sets.items():
        if utts and all(getattr(u, "parts", None) is not None for u in utts):
            parts = {u.id: [p.id for p in u.parts] for u in utts}
        else:
            sources = Path(manifests[name]).parent / "sources.json" if manifests and name in manifests else None
            if sources is None or not sources.is_file():
                continue
            try:
                parts = read_parts(sources)
            except InContextError:
                continue
            if not all(u.id in parts for u in utts):
                continue                      # a sources.json of another set in the same folder
            parts = {u.id: parts[u.id] for u in utts}
        needed = {p for ids_ in parts.values() for p in ids_}
        holder = next((other for other in sets if other != name and needed <= ids[other]), None)
        if holder is not None:
            pairs[name] = (holder, parts)
    return pairs
