"""The scored set as reference/hypothesis files that NIST sclite and meeteval read.

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

Ids and speakers may not hold white space (they are fields of these formats). No Lightning or Hydra.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from asr_pe.data.kaldi_export import recording_ids
from asr_pe.errors import UserError
from asr_pe.io import atomic_write_text

from .scoring import normalize_text

__all__ = ["SCLITE_FILES", "check_fields", "sclite_files", "write_sclite_files"]

SCLITE_FILES = ("ref.stm", "hyp.stm", "ref.trn", "hyp.trn", "ref_recordings.stm")
# the end of the last gap of a recording: the manifest does not say how long the file is
FILE_END = 999999.999
GAP_LINE = "{rec} 1 inter_segment_gap {start:.3f} {end:.3f} <o,,unknown> ignore_time_segment_in_scoring"


def check_fields(records: Sequence[Mapping], speaker_of: Mapping[str, str]) -> None:
    """Raise UserError for an id or speaker with white space (it would split an STM/trn field)."""
    for rec in records:
        for kind, value in (("id", rec["id"]), ("speaker", speaker_of[rec["id"]])):
            if not value or any(c.isspace() for c in value):
                raise UserError(f"utterance {rec['id']!r}: its {kind} {value!r} is empty or holds white space, "
                                "which an STM or trn file cannot hold; give ids and speakers without spaces in "
                                "the manifest")


def recording_stm_lines(utts: Sequence, speaker_of: Mapping[str, str]) -> list[str]:
    """``ref_recordings.stm`` (module docstring), sorted by recording and start time as sclite wants."""
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
    """File name -> text of the files of the module docstring; ``records`` and ``utts`` in manifest order
    (``utts``: the manifest's utterances, for their recordings and times)."""
    check_fields(records, speaker_of)
    out = {name: [] for name in SCLITE_FILES}
    out["ref_recordings.stm"] = recording_stm_lines(
        [replace(u, text=r["ref"]) for u, r in zip(utts, records)], speaker_of)
    for rec in records:
        utt, spk = rec["id"], speaker_of[rec["id"]]
        for side in ("ref", "hyp"):
            words = normalize_text(rec[side])
            out[f"{side}.stm"].append(f"{utt} 1 {spk} 0.000 {rec['duration']:.3f} {words}".rstrip())
            out[f"{side}.trn"].append(f"{words} ({spk}-{utt})".lstrip())
    return {name: "".join(line + "\n" for line in lines) for name, lines in out.items()}


def write_sclite_files(records: Sequence[Mapping], speaker_of: Mapping[str, str], utts: Sequence,
                       folder: str | Path) -> list[Path]:
    """Write the files into ``folder`` (each atomically); returns their paths."""
    files = sclite_files(records, speaker_of, utts)
    paths = []
    for name, text in files.items():
        atomic_write_text(Path(folder) / name, text)
        paths.append(Path(folder) / name)
    return paths
