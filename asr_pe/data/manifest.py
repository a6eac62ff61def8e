"""JSON-lines manifests: one utterance a line.

Keys (exactly those of the design): ``audio_filepath``, ``duration`` (s), ``text`` and the
optional ``offset`` (s into the file), ``speaker``, ``id`` and ``parts``. Unknown keys are
rejected so that a typo such as ``"ofset"`` cannot silently read the wrong audio.

``parts`` is what a long-form recording is made of (`asr_pe.data.longform_sets`): a list of
``{"id": <source utterance id>, "start": <s>, "end": <s>}``, seconds within the recording, in
time order (built recordings never overlap them; a transcribed talk's segments may touch or
overlap as its transcript says). It lets the evaluation score the same utterances decoded inside the
recording and decoded alone (`asr_pe.evaluation.in_context`).

Reading validates every line and reports ``<manifest>:<line>: <reason>``; an ``Utterance``
remembers that location in ``source`` so that later errors (audio, tokenizer) can point at
the manifest line that caused them.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asr_pe.errors import MissingFileError, UserError
from asr_pe.io import atomic_write_text

logger = logging.getLogger(__name__)

REQUIRED_KEYS = ("audio_filepath", "duration", "text")
OPTIONAL_KEYS = ("offset", "speaker", "id", "parts")
PART_KEYS = ("id", "start", "end")
ALLOWED_KEYS = frozenset(REQUIRED_KEYS + OPTIONAL_KEYS)
# How many skip reasons the single strict=False warning quotes.
MAX_REPORTED_REASONS = 5


@dataclass(frozen=True)
class Part:
    """A source utterance inside a long-form recording: ``[start, end)`` seconds of it."""

    id: str
    start: float
    end: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Utterance:
    """One (segment of an) audio file with its transcript.

    ``source`` ("<manifest path>:<line>") is bookkeeping for error messages: it is not
    written to manifests and does not take part in equality or hashing.
    """

    id: str
    audio_filepath: str
    duration: float
    text: str
    offset: float = 0.0
    speaker: str | None = None
    parts: tuple[Part, ...] | None = None
    source: str | None = field(default=None, compare=False)

    def to_json(self, *, relative_to: str | os.PathLike | None = None) -> dict[str, Any]:
        """The manifest record; ``offset``/``speaker`` only when set."""
        path = self.audio_filepath
        if relative_to is not None:
            path = os.path.relpath(path, os.fspath(relative_to))
        record: dict[str, Any] = {
            "id": self.id,
            "audio_filepath": path,
            "duration": self.duration,
            "text": self.text,
        }
        if self.offset:
            record["offset"] = self.offset
        if self.speaker is not None:
            record["speaker"] = self.speaker
        if self.parts is not None:
            record["parts"] = [p.to_json() for p in self.parts]
        return record


class ManifestError(UserError, ValueError):
    """A bad manifest line; ``str(e) == "<path>:<line>: <reason>"``."""

    def __init__(self, path: str | os.PathLike, line: int, reason: str):
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}")


def default_id(audio_filepath: str, offset: float) -> str:
    """File stem, plus ``_<offset>`` (ms precision, trailing zeros dropped) when offset != 0."""
    stem = Path(audio_filepath).stem
    if not offset:
        return stem
    text = f"{offset:.3f}".rstrip("0").rstrip(".")
    return f"{stem}_{text}"


def _is_number(value: Any) -> bool:
    # bool is an int subclass; "duration": true is a mistake, not 1 second.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_parts(value: Any, duration: float | None = None) -> tuple[Part, ...]:
    """Validate a ``parts`` list (see the module docstring); raises ValueError with the reason.

    Each part needs a non-empty string ``id`` and numbers ``0 <= start < end``; parts are in time
    order (by start); with ``duration`` the last ends within it (1 ms of rounding)."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"parts must be a non-empty list of {{id, start, end}}, got {value!r:.80}")
    parts: list[Part] = []
    for k, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != set(PART_KEYS):
            raise ValueError(f"parts[{k}] must be an object with exactly the keys id, start, end, "
                             f"got {item!r:.80}")
        pid, start, end = item["id"], item["start"], item["end"]
        if not isinstance(pid, str) or not pid.strip():
            raise ValueError(f"parts[{k}].id must be a non-empty string, got {pid!r}")
        if not (_is_number(start) and _is_number(end) and math.isfinite(start) and math.isfinite(end)
                and 0 <= start < end):
            raise ValueError(f"parts[{k}] ({pid}) needs numbers 0 <= start < end, got {start!r}, {end!r}")
        if parts and start < parts[-1].start:
            raise ValueError(f"parts[{k}] ({pid}) starts at {start}, before parts[{k - 1}] "
                             f"({parts[-1].start}): parts must be in time order")
        parts.append(Part(id=pid, start=float(start), end=float(end)))
    last = max(parts, key=lambda p: p.end)
    if duration is not None and last.end > duration + 1e-3:
        raise ValueError(f"part {last.id} ends at {last.end} s, after the recording's duration "
                         f"{duration} s")
    return tuple(parts)


def _parse_record(record: Any, manifest_dir: str, exists) -> Utterance:
    """Validate one decoded JSON value; raises ValueError with the reason."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"missing required key(s) {', '.join(missing)}")
    unknown = sorted(set(record) - ALLOWED_KEYS)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(ALLOWED_KEYS))})"
        )

    audio = record["audio_filepath"]
    if not isinstance(audio, str) or not audio.strip():
        raise ValueError("audio_filepath must be a non-empty string")
    duration = record["duration"]
    if not _is_number(duration) or not math.isfinite(duration):
        raise ValueError(f"duration must be a finite number, got {duration!r}")
    if duration <= 0:
        raise ValueError(f"duration must be > 0, got {duration!r}")
    text = record["text"]
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty")
    offset = record.get("offset", 0.0)
    if offset is None:
        offset = 0.0
    if not _is_number(offset) or not math.isfinite(offset):
        raise ValueError(f"offset must be a finite number, got {offset!r}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset!r}")
    speaker = record.get("speaker")
    if speaker is not None and not isinstance(speaker, str):
        # Integer speaker ids (LibriSpeech) are common; keep them as strings.
        if _is_number(speaker):
            speaker = str(speaker)
        else:
            raise ValueError(f"speaker must be a string, got {type(speaker).__name__}")
    utt_id = record.get("id")
    if utt_id is not None and (not isinstance(utt_id, str) or not utt_id.strip()):
        raise ValueError(f"id must be a non-empty string, got {utt_id!r}")
    parts = parse_parts(record["parts"], float(duration)) if record.get("parts") is not None else None

    path = os.path.expanduser(audio)
    if not os.path.isabs(path):
        path = os.path.join(manifest_dir, path)
    path = os.path.normpath(path)
    if not exists(path):
        raise ValueError(f"audio file not found: {path}")
    return Utterance(
        id=utt_id if utt_id is not None else default_id(path, float(offset)),
        audio_filepath=path,
        duration=float(duration),
        text=text.strip(),
        offset=float(offset),
        speaker=speaker,
        parts=parts,
    )


def read_manifest(path: str | os.PathLike, *, strict: bool = True) -> list[Utterance]:
    """Read and validate a JSON-lines manifest.

    Blank lines are ignored. ``strict=True`` raises ``ManifestError`` at the first bad line;
    ``strict=False`` skips bad lines and logs one warning with their count and first reasons.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MissingFileError(f"manifest not found: {path}")
    manifest_dir = os.path.dirname(os.path.abspath(path))

    exists_cache: dict[str, bool] = {}  # segmented corpora reference one file many times

    def exists(p: str) -> bool:
        if p not in exists_cache:
            exists_cache[p] = os.path.exists(p)
        return exists_cache[p]

    utterances: list[Utterance] = []
    first_line_of_id: dict[str, int] = {}
    skipped: list[str] = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"invalid JSON: {e.msg} (column {e.colno})") from None
                utt = _parse_record(record, manifest_dir, exists)
                if utt.id in first_line_of_id:
                    raise ValueError(
                        f"duplicate id {utt.id!r} (first used on line {first_line_of_id[utt.id]})"
                    )
            except ValueError as e:
                if strict:
                    raise ManifestError(path, line_no, str(e)) from None
                skipped.append(f"{path}:{line_no}: {e}")
                continue
            first_line_of_id[utt.id] = line_no
            utterances.append(
                Utterance(
                    id=utt.id,
                    audio_filepath=utt.audio_filepath,
                    duration=utt.duration,
                    text=utt.text,
                    offset=utt.offset,
                    speaker=utt.speaker,
                    parts=utt.parts,
                    source=f"{path}:{line_no}",
                )
            )
    if skipped:
        shown = "\n  ".join(skipped[:MAX_REPORTED_REASONS])
        more = len(skipped) - MAX_REPORTED_REASONS
        logger.warning(
            "%s: skipped %d bad line(s), kept %d utterances:\n  %s%s",
            path,
            len(skipped),
            len(utterances),
            shown,
            f"\n  ... and {more} more" if more > 0 else "",
        )
    if not utterances:
        logger.warning("%s: manifest holds no utterances", path)
    return utterances


def write_manifest(
    path: str | os.PathLike,
    utterances: Iterable[Utterance],
    *,
    relative_paths: bool = False,
) -> None:
    """Write a manifest atomically (tmp file + ``os.replace``).

    Ids must be unique. ``relative_paths=True`` stores audio paths relative to the
    manifest's folder so that a corpus folder can be moved as a whole.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    utterances = list(utterances)
    seen: set[str] = set()
    for utt in utterances:
        if utt.id in seen:
            raise ValueError(f"write_manifest({path}): duplicate utterance id {utt.id!r}")
        seen.add(utt.id)
    lines = [json.dumps(u.to_json(relative_to=folder if relative_paths else None), ensure_ascii=False) + "\n"
             for u in utterances]
    atomic_write_text(path, "".join(lines))


def manifest_stats(utterances: Sequence[Utterance]) -> dict[str, float]:
    """Count, total hours and min/max/mean duration (s); zeros for an empty list."""
    durations = [u.duration for u in utterances]
    if not durations:
        return {"count": 0, "hours": 0.0, "min_duration": 0.0, "max_duration": 0.0, "mean_duration": 0.0}
    total = math.fsum(durations)
    return {
        "count": len(durations),
        "hours": total / 3600.0,
        "min_duration": min(durations),
        "max_duration": max(durations),
        "mean_duration": total / len(durations),
    }
