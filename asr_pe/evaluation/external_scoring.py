"""Score another toolkit's transcripts of a test manifest by input length (NeMo, ESPnet, icefall, Whisper, ...).

`score_hypotheses` reads a manifest (the references, durations and ids) and a hypothesis file,
and writes what ``evaluate.py`` writes for a run of ours, with the same functions
(`asr_pe.evaluation.scoring.score_record`, `asr_pe.evaluation.buckets.bucket_table`,
`write_per_utt`, `write_bucket_files`), so the numbers are comparable line for line:

    <out>/run_info.json                 {"label": ..., "system": "external", ...}: plot_wer_vs_length.py
                                        reads <out> as a run beside the recipe's own
    <out>/eval/<test set>/per_utt.jsonl one record per manifest utterance, in manifest order
    <out>/eval/<test set>/buckets.csv   doubling buckets (0-2, 2-4, ... s) and "all", bootstrap CIs
    <out>/eval/<test set>/buckets.md    (+ buckets.meta.json: hypothesis file, format, counts)

Hypothesis formats (`read_hypotheses`):

- ``jsonl``: one object a line with ``id`` and the hypothesis under ``text_key`` (default
  ``text``). NeMo's ``transcribe_speech.py`` output keeps the input manifest's keys, so its lines
  hold the *reference* in ``text`` and the hypothesis in ``pred_text``: a file whose lines carry
  both is refused unless ``text_key`` is named, rather than scoring references against themselves.
- ``text`` (Kaldi/ESPnet/icefall): ``<utt-id> <words...>``; an id alone on its line is an empty
  hypothesis.
- ``ctm`` (NIST): ``<recording> <channel> <start> <duration> <word> [<confidence>]``; ``;;``
  lines are comments. The recording field is an utterance id (times relative to the utterance)
  or a recording id of the Kaldi export (`asr_pe.data.kaldi_export.recording_ids`; times in the
  recording, as Kaldi's ``get_ctm.sh`` writes them through ``segments``): such a word belongs to
  the utterance whose span holds its midpoint (sclite's rule). A name that is both, a whole TED
  talk ``<talk>`` that starts at its first scored segment, is read as the recording (times in the
  talk's file, what a system decoding that file writes); only an utterance that fills its file from
  0 takes all its words whatever their times. A CTM cannot spell an empty hypothesis, so an
  utterance without words is one. A word in no utterance's span (applause before a talk, speech
  the corpus left untranscribed: TED-LIUM's ``ignore_time_segment_in_scoring`` lines) is dropped
  and counted (``ctm_words_outside_utterances`` in buckets.meta.json), as sclite drops a word in an
  ignored segment of its STM; ``ref_recordings.stm`` (`sclite_files`) is that STM.

  A CTM is one decoding, sorted by recording, channel and start time (sclite's input format), and
  a channel is one side of a recording (``A``/``B`` of a telephone call; Kaldi writes ``1``),
  which a manifest of mono (downmixed) audio cannot tell apart. So a recording with words on two
  channels is an error unless ``channel`` picks one (the other channels' lines are counted and
  left out), and a word that starts before the previous word of its recording and channel, or
  before that word's middle (two decodings of the same speech), is an error naming the line:
  scored, either would count a correct transcript as errors.

Beside per_utt.jsonl: ``alignments.pra`` and ``speakers.{csv,md}``
(`asr_pe.evaluation.alignment_report`), and the STM/trn files sclite and meeteval read
(`sclite_files`). ``normalizer`` (``--normalizer``, off by default) applies a
named normaliser to references and hypotheses alike (`load_normalizer`), recorded in
buckets.meta.json (``"normalizer": null`` when off).

Ids: an utterance of the manifest without a hypothesis is an error (`HypothesisError`) unless
``missing="empty"`` (then it is scored as empty, all deletions, and counted); a hypothesis whose
id is not in the manifest is an error unless ``extra="ignore"`` (a file that covers several test
sets). A duplicate id and a malformed line are errors naming ``<file>:<line>``. An empty
hypothesis is scored as deletions of every reference word (`score_utterance`).

Durations are those of the manifest rounded to float32, as ``evaluate.py`` sees them through its
data loader, so an utterance falls in the same bucket whichever scored it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from asr_pe.data.kaldi_export import recording_ids
from asr_pe.data.manifest import Utterance, read_manifest
from asr_pe.evaluation.buckets import (
    DOUBLING,
    bucket_table,
    describe_edges,
    resolve_edges,
    write_bucket_files,
    write_per_utt,
)
from asr_pe.errors import ConfigError, UserError
from asr_pe.evaluation.alignment_report import speaker_of_utterances, write_alignment_reports
from asr_pe.evaluation.scoring import normalize_text, score_record
from asr_pe.io import atomic_write_text, read_jsonl
from asr_pe.run_folder import CHECKPOINTS, CONFIG, PER_UTT, eval_dir, result_dir, run_info_path

__all__ = ["FORMATS", "HypothesisError", "Hypotheses", "read_hypotheses", "guess_format", "match_hypotheses",
           "score_hypotheses", "score_in_context", "check_system_folder", "NORMALIZERS", "NormalizerError",
           "load_normalizer", "sclite_files"]

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "text", "ctm")
_NEMO_PRED_KEY = "pred_text"
# How many ids an error message quotes.
_QUOTED = 5


class HypothesisError(ConfigError):
    """A bad hypothesis file or a mismatch with the manifest; the message names the file (and line)."""


@dataclass
class Hypotheses:
    """Hypothesis text per id, where each id was read (``<file>:<line>``) and, for a CTM, the words
    kept per recording before they are assigned to utterances."""

    path: str
    format: str
    text: dict[str, str] = field(default_factory=dict)
    line_of: dict[str, int] = field(default_factory=dict)
    ctm_words: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)  # id -> (start, dur, word)
    ctm_channel: str | None = None      # the one CTM channel scored (None: the file must hold one per recording)
    ctm_other_channel_lines: int = 0    # lines of other channels left out


def guess_format(path: str | os.PathLike) -> str:
    """``jsonl`` for .jsonl/.json, ``ctm`` for .ctm, ``text`` for a file named ``text``, ``text.*``,
    ``*.text`` (ESPnet/icefall decode folders name them ``hyp.text``, ``<set>.text``) or .txt."""
    name = Path(path).name.lower()
    if name.endswith((".jsonl", ".json")):
        return "jsonl"
    if name.endswith(".ctm"):
        return "ctm"
    if name == "text" or name.endswith((".txt", ".text")) or name.startswith("text"):
        return "text"
    raise HypothesisError(f"{path}: cannot tell the hypothesis format from the file name; pass --format "
                          f"({' | '.join(FORMATS)})")


def _add(hyps: Hypotheses, utt_id: str, text: str, line: int) -> None:
    if utt_id in hyps.line_of:
        raise HypothesisError(f"{hyps.path}:{line}: duplicate id {utt_id!r} (first at line {hyps.line_of[utt_id]}); "
                              "each utterance needs exactly one hypothesis")
    hyps.line_of[utt_id] = line
    hyps.text[utt_id] = text


def _read_jsonl(path: str, text_key: str | None) -> Hypotheses:
    hyps = Hypotheses(path, "jsonl")
    key = text_key or "text"
    for line_no, rec in read_jsonl(path, HypothesisError):
        if text_key is None and _NEMO_PRED_KEY in rec:
            raise HypothesisError(
                f"{path}:{line_no}: the line holds both 'text' and '{_NEMO_PRED_KEY}' (a NeMo transcription "
                f"manifest, whose 'text' is the reference); pass --text-key {_NEMO_PRED_KEY}")
        utt_id, text = rec.get("id"), rec.get(key)
        if not isinstance(utt_id, str) or not utt_id.strip():
            raise HypothesisError(f"{path}:{line_no}: no 'id' (a non-empty string); export the manifests with "
                                  "their ids and keep them in the toolkit's output")
        text = "" if text is None else text  # a toolkit that writes nothing for silence: an empty hypothesis
        if not isinstance(text, str):
            raise HypothesisError(f"{path}:{line_no}: '{key}' must be a string, got {type(text).__name__}")
        _add(hyps, utt_id, text, line_no)
    return hyps


def _read_text(path: str) -> Hypotheses:
    hyps = Hypotheses(path, "text")
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            parts = line.split(maxsplit=1)
            _add(hyps, parts[0], parts[1].strip() if len(parts) > 1 else "", line_no)
    return hyps


def _ctm_line(path: str, line_no: int, line: str) -> tuple[str, str, float, float, str]:
    """(recording, channel, start, duration, word) of one CTM line."""
    fields = line.split()
    if len(fields) not in (5, 6):
        raise HypothesisError(f"{path}:{line_no}: a CTM line has 5 or 6 fields "
                              f"(<recording> <channel> <start> <duration> <word> [<confidence>]), "
                              f"got {len(fields)}")
    try:
        start, dur = float(fields[2]), float(fields[3])
    except ValueError:
        raise HypothesisError(f"{path}:{line_no}: start and duration must be numbers, got "
                              f"{fields[2]!r} {fields[3]!r}") from None
    if not (math.isfinite(start) and math.isfinite(dur)) or dur < 0:
        raise HypothesisError(f"{path}:{line_no}: bad start/duration {fields[2]} {fields[3]}")
    return fields[0], fields[1], start, dur, fields[4]


def _check_time_order(path: str, line_no: int, rec: str, chan: str, start: float, dur: float,
                      previous: dict[tuple[str, str], tuple[float, float, int]]) -> None:
    """A channel's words follow each other in time; ``previous``: (recording, channel) -> the last
    word's (start, duration, line). Going back, or starting before the last word's middle, is a
    second decoding of the same speech in the file (or an unsorted one)."""
    last = previous.get((rec, chan))
    previous[(rec, chan)] = (start, dur, line_no)
    if last is None:
        return
    start0, dur0, line0 = last
    if start < start0:
        raise HypothesisError(
            f"{path}:{line_no}: recording {rec!r} channel {chan!r} goes back in time ({start:g} s after {start0:g} s "
            f"at line {line0}): a CTM holds one decoding sorted by recording, channel and start time, so this is a "
            f"second decoding appended or an unsorted file; score each decoding on its own, or sort the file "
            f"(sort -k1,1 -k2,2 -k3,3n) if it holds one")
    if start < start0 + dur0 / 2:
        raise HypothesisError(
            f"{path}:{line_no}: recording {rec!r} channel {chan!r}: the word at {start:g} s starts before the middle "
            f"of the word at {start0:g} s ({dur0:g} s long, line {line0}): two decodings of the same speech in one "
            f"file; score each decoding on its own")


def _read_ctm(path: str, channel: str | None = None) -> Hypotheses:
    hyps = Hypotheses(path, "ctm", ctm_channel=channel)
    first: dict[str, tuple[str, int]] = {}      # recording -> (its channel, first line)
    previous: dict[tuple[str, str], tuple[float, float, int]] = {}
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip() or line.lstrip().startswith(";;"):
                continue
            rec, chan, start, dur, word = _ctm_line(path, line_no, line)
            seen.add(chan)
            if channel is not None and chan != channel:
                hyps.ctm_other_channel_lines += 1
                continue
            chan0, line0 = first.setdefault(rec, (chan, line_no))
            if chan != chan0:  # a recording's words come from one channel
                raise HypothesisError(
                    f"{path}:{line_no}: recording {rec!r} has words on channel {chan!r} and on channel {chan0!r} "
                    f"(line {line0}); a CTM channel is one side of a recording, which the manifest's mono audio "
                    f"cannot tell apart: pass --channel {chan0} (or {chan}) to score one side")
            _check_time_order(path, line_no, rec, chan, start, dur, previous)
            hyps.ctm_words.setdefault(rec, []).append((start, dur, word))
            hyps.line_of.setdefault(rec, line_no)
    if channel is not None and channel not in seen and seen:
        # every utterance would be scored as empty: 100 % deletions instead of an answer
        raise HypothesisError(f"{path}: no word on channel {channel!r} (the file's channels: "
                              f"{', '.join(sorted(seen))}); pass one of them to --channel")
    if hyps.ctm_other_channel_lines:
        log.info("%s: %d line(s) of channels other than %r left out", path, hyps.ctm_other_channel_lines, channel)
    return hyps


def read_hypotheses(path: str | os.PathLike, fmt: str = "auto", text_key: str | None = None,
                    channel: str | None = None) -> Hypotheses:
    """Read a hypothesis file (module docstring); ``fmt="auto"`` guesses from the file name;
    ``channel``: the one CTM channel to score."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise HypothesisError(f"{path}: hypothesis file not found")
    fmt = guess_format(path) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise HypothesisError(f"hypothesis format {fmt!r}: choose one of {FORMATS}")
    if text_key is not None and fmt != "jsonl":
        raise HypothesisError(f"{path}: --text-key applies to JSONL hypotheses only (format {fmt})")
    if channel is not None and fmt != "ctm":
        raise HypothesisError(f"{path}: --channel applies to CTM hypotheses only (format {fmt})")
    try:
        if fmt == "jsonl":
            return _read_jsonl(path, text_key)
        return _read_text(path) if fmt == "text" else _read_ctm(path, channel)
    except UnicodeDecodeError as e:
        raise HypothesisError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _quote(ids: Sequence[str]) -> str:
    ids = list(ids)
    return ", ".join(repr(i) for i in ids[:_QUOTED]) + (f", ... ({len(ids)} in all)" if len(ids) > _QUOTED else "")


def _ctm_to_utterances(hyps: Hypotheses, utts: Sequence[Utterance]) -> tuple[dict[str, str], list[str], int]:
    """(hypothesis per utterance id, CTM ids that name nothing in the manifest, words outside every
    utterance span of their recording)."""
    utt_by_id = {u.id: u for u in utts}
    rec_of = recording_ids(utts)
    members: dict[str, list[Utterance]] = defaultdict(list)
    for u in utts:
        members[rec_of[u.id]].append(u)
    words: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    unknown, outside = [], 0
    for name, items in hyps.ctm_words.items():
        utt = utt_by_id.get(name)
        if utt is not None and (utt.offset == 0 or name not in members):
            words[name].extend(items)  # utterance-level CTM: times inside the utterance
        elif name in members:        # recording-level CTM: the utterance whose span holds the midpoint
            spans = members[name]
            for start, dur, word in items:
                mid = start + dur / 2
                hit = [u for u in spans if u.offset <= mid < u.offset + u.duration]
                if hit:
                    words[hit[0].id].append((start, dur, word))
                else:
                    outside += 1
        else:
            unknown.append(name)
    # sorted() is stable: words with equal start times keep their order in the file
    text = {i: " ".join(w for _, _, w in sorted(ws, key=lambda x: x[0])) for i, ws in words.items()}
    return text, unknown, outside


def match_hypotheses(utts: Sequence[Utterance], hyps: Hypotheses, *, missing: str = "error",
                     extra: str = "error") -> tuple[list[str], dict]:
    """One hypothesis per manifest utterance (in manifest order) and counts for the metadata.

    ``missing``: ``error`` | ``empty``; ``extra``: ``error`` | ``ignore`` (module docstring)."""
    if missing not in ("error", "empty") or extra not in ("error", "ignore"):
        raise ValueError(f"missing={missing!r} must be error|empty and extra={extra!r} error|ignore")
    ids = [u.id for u in utts]
    outside = 0
    if hyps.format == "ctm":
        text, unknown, outside = _ctm_to_utterances(hyps, utts)
        if outside:
            log.warning("%s: %d word(s) lie outside every utterance span of their recording and are not scored",
                        hyps.path, outside)
        # a CTM has no line for an utterance without words: its hypothesis is empty, not missing
        absent = []
        text = {i: text.get(i, "") for i in ids}
    else:
        text = hyps.text
        wanted = set(ids)
        unknown = [i for i in text if i not in wanted]
        absent = [i for i in ids if i not in text]
    if unknown and extra == "error":
        first = min(unknown, key=lambda i: hyps.line_of.get(i, 0))
        raise HypothesisError(
            f"{hyps.path}:{hyps.line_of.get(first, 0)}: {len(unknown)} hypothesis id(s) are not in the manifest "
            f"({_quote(unknown)}); score against the manifest the toolkit decoded, or pass --extra ignore when the "
            "file covers several test sets")
    if absent and missing == "error":
        raise HypothesisError(
            f"{hyps.path}: {len(absent)} of {len(ids)} manifest utterance(s) have no hypothesis ({_quote(absent)}); "
            "decode them, or pass --missing empty to score each as an empty hypothesis (all deletions)")
    out = [text.get(i, "") for i in ids]
    counts = {"utterances": len(ids), "missing_scored_empty": len(absent),
              "empty_hypotheses": sum(not h.strip() for h in out), "extra_ignored": len(unknown)}
    if hyps.format == "ctm":
        counts["ctm_words_outside_utterances"] = outside
        if hyps.ctm_channel is not None:
            counts.update(ctm_channel=hyps.ctm_channel, ctm_lines_other_channels=hyps.ctm_other_channel_lines)
    return out, counts


def check_system_folder(out_dir: Path, label: str) -> None:
    """``out_dir`` may receive a system's results: not a trained run's folder (its run_info.json,
    with pe, loss, seed and data report, and its eval/ results would be replaced), and not the
    folder of another scored system."""
    held = [name for name in (CONFIG, CHECKPOINTS) if (out_dir / name).exists()]
    if held:
        raise HypothesisError(f"--out {out_dir}: a trained run's folder (it holds {' and '.join(held)}), whose "
                              f"run_info.json and eval/ results score.py would replace; give the system its own "
                              f"--out folder")
    info_path = run_info_path(out_dir)
    if not info_path.is_file():
        return
    try:
        old = json.loads(info_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        old = None
    if not isinstance(old, dict) or old.get("system") != "external":
        raise HypothesisError(f"{info_path}: not written by score.py (no \"system\": \"external\"): a run's folder, "
                              f"whose run_info.json score.py would replace; give the system its own --out folder")
    if old.get("label") != label:  # another test set scored earlier into the same folder: one label
        raise HypothesisError(f"{info_path}: this folder holds system {old.get('label')!r}; give --label "
                              f"{old.get('label')!r} or another --out for {label!r}")


def score_hypotheses(manifest: str | os.PathLike, hyp_path: str | os.PathLike, out_dir: str | os.PathLike, *,
                     fmt: str = "auto", text_key: str | None = None, test_set: str | None = None,
                     label: str | None = None, edges: Sequence[float] | str = DOUBLING, n_boot: int = 1000,
                     missing: str = "error", extra: str = "error", train_max_duration: float | None = None,
                     channel: str | None = None, normalizer: str | None = None) -> tuple[list[dict], Path]:
    """Score ``hyp_path`` against ``manifest``; write ``<out_dir>/eval/<test set>/``; returns (rows, folder).

    ``test_set`` defaults to the manifest's name without ``.jsonl``; ``label`` (the legend of the
    plots) to ``out_dir``'s name. ``train_max_duration``: the system's longest training input, the
    plots' reference bucket (unknown for most published models: leave it None). ``channel``: the
    one CTM channel to score. ``normalizer``: a name of `NORMALIZERS` (`load_normalizer`) applied to
    references and hypotheses alike (None: only lower case and white space, as for our runs). A
    trained run's folder is refused before anything is read."""
    manifest, out_dir = Path(manifest), Path(out_dir)
    label = label or out_dir.resolve().name
    check_system_folder(out_dir, label)
    norm, norm_record = load_normalizer(normalizer) if normalizer else ((lambda t: t), None)
    test_set = test_set or manifest.name.removesuffix(".jsonl")
    utts = read_manifest(manifest)
    if not utts:
        raise HypothesisError(f"{manifest}: the manifest has no utterances")
    resolve_edges(edges, [])  # bad edges fail before the hypothesis file is read
    hyps = read_hypotheses(hyp_path, fmt, text_key, channel)
    texts, counts = match_hypotheses(utts, hyps, missing=missing, extra=extra)
    # float32 durations: what evaluate.py's data loader hands its scoring (same buckets at the edges)
    records = [score_record(u.id, float(np.float32(u.duration)), norm(u.text), norm(h)) for u, h in zip(utts, texts)]
    resolved = resolve_edges(edges, [r["duration"] for r in records])
    rows = bucket_table(records, resolved, n_boot=n_boot, seed=0)
    info = {"label": label, "system": "external", "pe": None, "loss": None, "encoder": None, "seed": None,
            "train_max_duration": train_max_duration}
    atomic_write_text(run_info_path(out_dir), json.dumps(info, indent=2, sort_keys=True) + "\n")
    folder = result_dir(out_dir, test_set)
    meta = {"system": label, "test_set": test_set, "manifest": str(manifest), "hypotheses": str(hyp_path),
            "format": hyps.format, **({"text_key": text_key} if text_key else {}), "normalizer": norm_record,
            "edges": describe_edges(edges, resolved), **counts}
    write_per_utt(records, folder / PER_UTT)
    write_bucket_files(rows, folder, meta=meta)
    # what reviewers inspect (`alignment_report`) and the STM/trn files sclite and meeteval read
    speaker_of = speaker_of_utterances(utts)
    write_alignment_reports(records, speaker_of, folder, f"{label} on {test_set}")
    try:
        for name, text in sclite_files(records, speaker_of, utts).items():
            atomic_write_text(folder / name, text)
    except UserError as e:  # the scores stand; only these files cannot be written
        log.warning("%s: STM/trn files not written: %s", folder, e)
    score_in_context(utts, manifest, out_dir, test_set, n_boot=n_boot)
    return rows, folder


def score_in_context(utts: Sequence[Utterance], manifest: Path, out_dir: Path, test_set: str, *,
                     n_boot: int = 1000) -> Path | None:
    """The in-context ratio of a long-form set (`asr_pe.evaluation.in_context`), as ``evaluate.py``
    writes it: when the manifest records each recording's source utterances (its rows' ``parts``,
    or the builder's ``sources.json`` beside it) and another set already scored into ``out_dir``
    holds every one of them (the short set, decoded alone by the same system), write
    ``<out_dir>/eval/<test set>/in_context.{json,md}``. Returns that folder, or None (no parts, or
    no scored set holds them: score the short set first, then the long one)."""
    from asr_pe.evaluation.in_context import in_context_pairs, read_records, write_in_context

    scored = {d.name: d for d in sorted(eval_dir(out_dir).glob("*/")) if (d / PER_UTT).is_file()}
    sets: dict[str, Sequence] = {test_set: utts}
    for name, folder in scored.items():
        if name != test_set:  # only the ids matter for finding the set that holds the parts
            sets[name] = [Utterance(id=str(r["id"]), audio_filepath="", duration=0.0, text="")
                          for r in read_records(folder / PER_UTT)]
    pair = in_context_pairs(sets, {test_set: str(manifest)}).get(test_set)
    if pair is None:
        if any(getattr(u, "parts", None) for u in utts) or (manifest.parent / "sources.json").is_file():
            log.info("%s: recordings with parts, but no set scored into %s holds them all; score the set of "
                     "their source utterances first for the in-context ratio", test_set, out_dir)
        return None
    alone, parts = pair
    folder = result_dir(out_dir, test_set)
    res = write_in_context(folder, scored[alone], parts, alone_set=alone, n_boot=n_boot)
    print(f"[asr_pe] {test_set}: in-context ratio {res.ratio:.2f} (the recordings whole vs their parts in "
          f"{alone} alone): {folder}/in_context.md")
    return folder


# ----------------------------------------------------------------------------- normalisers

# name -> (module, class) of the whisper-normalizer package
NORMALIZERS = {"whisper_english": ("whisper_normalizer.english", "EnglishTextNormalizer"),
               "whisper_basic": ("whisper_normalizer.basic", "BasicTextNormalizer")}
NORMALIZER_PACKAGE = "whisper-normalizer"


class NormalizerError(ConfigError):
    """An unknown normaliser name, or its package is not installed."""


def load_normalizer(name: str) -> tuple[Callable[[str], str], dict]:
    """(the function, its record for buckets.meta.json: name, package, version) of a named normaliser
    for scoring another system's output (``score.py --normalizer NAME``; off by default).

    The toolkit's own scoring only lowercases and collapses white space (`asr_pe.evaluation.scoring`):
    the corpora's references are normalised at preparation. A foreign system (Whisper, a cased and
    punctuated NeMo model) writes "Mr. Smith's $20." where the reference says "mister smith's twenty
    dollars"; reviewers score such systems after Whisper's English normaliser, applied to the reference
    and the hypothesis alike (Radford et al. 2022, appendix C). This uses the maintained PyPI package
    ``whisper-normalizer`` (`pip install -e '.[normalize]'`, pinned in pyproject.toml); its name, the
    package and its version go into ``buckets.meta.json`` so a number always says how it was normalised.

    - ``whisper_english``: ``whisper_normalizer.english.EnglishTextNormalizer`` (spellings, numbers,
      contractions, fillers removed);
    - ``whisper_basic``: ``whisper_normalizer.basic.BasicTextNormalizer`` (lower case, punctuation and
      bracketed tags removed; any language).
    """
    if name not in NORMALIZERS:
        raise NormalizerError(f"--normalizer {name!r}: choose one of {', '.join(NORMALIZERS)}")
    module_name, cls_name = NORMALIZERS[name]
    try:
        module = importlib.import_module(module_name)
        version = importlib.metadata.version(NORMALIZER_PACKAGE)
    except (ImportError, importlib.metadata.PackageNotFoundError):
        raise NormalizerError(f"--normalizer {name} needs the package {NORMALIZER_PACKAGE}: pip install -e "
                              f"'.[normalize]' (or pip install {NORMALIZER_PACKAGE})") from None
    return getattr(module, cls_name)(), {"name": name, "package": NORMALIZER_PACKAGE, "version": version}


# ----------------------------------------------------------------------------- sclite / meeteval files

# the end of the last gap of a recording: the manifest does not say how long the file is
FILE_END = 999999.999
GAP_LINE = "{rec} 1 inter_segment_gap {start:.3f} {end:.3f} <o,,unknown> ignore_time_segment_in_scoring"


def _check_fields(records: Sequence[Mapping], speaker_of: Mapping[str, str]) -> None:
    """Raise UserError for an id or speaker with white space (it would split an STM/trn field)."""
    for rec in records:
        for kind, value in (("id", rec["id"]), ("speaker", speaker_of[rec["id"]])):
            if not value or any(c.isspace() for c in value):
                raise UserError(f"utterance {rec['id']!r}: its {kind} {value!r} is empty or holds white space, "
                                "which an STM or trn file cannot hold; give ids and speakers without spaces in "
                                "the manifest")


def _recording_stm_lines(utts: Sequence, speaker_of: Mapping[str, str]) -> list[str]:
    """``ref_recordings.stm`` (`sclite_files`), sorted by recording and start time as sclite wants."""
    rec_of = recording_ids(utts)
    by_rec: dict[str, list] = {}
    for u in utts:
        by_rec.setdefault(rec_of[u.id], []).append(u)
    lines = []
    for rec in sorted(by_rec):
        covered_to = 0.0
        for u in sorted(by_rec[rec], key=lambda u: (u.offset, u.id)):
            if u.offset > covered_to:
                lines.append(GAP_LINE.format(rec=rec, start=covered_to, end=u.offset))
            end = u.offset + u.duration
            lines.append(f"{rec} 1 {speaker_of[u.id]} {u.offset:.3f} {end:.3f} {normalize_text(u.text)}".rstrip())
            covered_to = max(covered_to, end)
        lines.append(GAP_LINE.format(rec=rec, start=covered_to, end=FILE_END))
    return lines


def sclite_files(records: Sequence[Mapping], speaker_of: Mapping[str, str], utts: Sequence) -> dict[str, str]:
    """File name -> text of the scored set as reference/hypothesis files that NIST sclite and meeteval
    read; ``records`` and ``utts`` in manifest order (``utts``: the manifest's utterances, for their
    recordings and times).

    Written beside ``per_utt.jsonl`` by score.py, from the texts it scored (after the normalisation of
    `asr_pe.evaluation.scoring.normalize_text`, and of the named normaliser when one was asked for), so
    either tool recomputes the same counts:

    - ``ref.stm`` / ``hyp.stm``: one STM line per utterance, ``<utterance id> 1 <speaker> 0.000
      <duration> <words>`` (the utterance is the STM "file", so each line is its own segment; no
      ``<label>`` field, which meeteval would read as a word). ``meeteval-wer wer -r ref.stm -h
      hyp.stm`` (meeteval's SISO WER, which needs one line per file) gives the WER of score.py's
      ``all`` row (tests/evaluation/test_alignment_reports.py runs it).
    - ``ref.trn`` / ``hyp.trn``: ``<words> (<speaker>-<utterance id>)``, as ESPnet writes them for
      ``sclite -r ref.trn trn -h hyp.trn trn -i rm -o all stdout`` (its per-speaker report reads the
      speaker from the id).
    - ``ref_recordings.stm``: the reference of a recording-level CTM (Kaldi's ``get_ctm.sh`` through
      ``segments``, Whisper on a whole file): ``<recording> 1 <speaker> <start> <end> <words>`` per
      utterance, times in the recording, recording ids of `asr_pe.data.kaldi_export.recording_ids`, and
      every stretch of a recording outside the set's utterances (before the first, between two, after
      the last: up to ``999999.999``) as TED-LIUM's own STM files mark theirs::

          TalkA 1 inter_segment_gap 2.000 5.000 <o,,unknown> ignore_time_segment_in_scoring

      sclite ignores every hypothesis word whose midpoint lies in such a segment (SCTK's infmts.htm,
      "IGNORE_TIME_SEGMENT_IN_SCORING"), which is what score.py does with a CTM word outside every
      utterance span (dropped, counted as ``ctm_words_outside_utterances``), so ``sclite -r
      ref_recordings.stm stm -h <the ctm> ctm`` scores the words score.py scores.

    Ids and speakers may not hold white space (they are fields of these formats)."""
    _check_fields(records, speaker_of)
    out = {name: [] for name in ("ref.stm", "hyp.stm", "ref.trn", "hyp.trn")}
    out["ref_recordings.stm"] = _recording_stm_lines(
        [replace(u, text=r["ref"]) for u, r in zip(utts, records)], speaker_of)
    for rec in records:
        utt, spk = rec["id"], speaker_of[rec["id"]]
        for side in ("ref", "hyp"):
            words = normalize_text(rec[side])
            out[f"{side}.stm"].append(f"{utt} 1 {spk} 0.000 {rec['duration']:.3f} {words}".rstrip())
            out[f"{side}.trn"].append(f"{words} ({spk}-{utt})".lstrip())
    return {name: "".join(line + "\n" for line in lines) for name, lines in out.items()}
