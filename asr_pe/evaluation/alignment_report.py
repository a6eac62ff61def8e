"""What reviewers open after a WER table: per-utterance alignments and per-speaker scores.

From the scored records of one set (``per_utt.jsonl``: id, ref, hyp and the counts of
`asr_pe.evaluation.scoring.score_utterance`) and a speaker per utterance:

- ``alignments.pra``: sclite's ``-o pra`` layout, one block per utterance in manifest order::

      id: (TalkA-TalkA-0001)
      Scores: (#C #S #D #I) 2 1 0 1
      REF:  the *** CAT sat
      HYP:  the HAT ON  sat
      Eval:     I   S

  words of an error in upper case, ``***`` for the missing side, the columns as wide as the longer
  word. The id is ``(<speaker>-<utterance id>)`` as ESPnet hands it to sclite.
- ``speakers.csv`` / ``speakers.md``: per speaker (the manifest's ``speaker``; without one, the
  utterance is its own speaker) utterances, reference words, correct, substitutions, deletions,
  insertions, WER and CER, worst WER first, and a last ``all`` row (sclite's ``.sys`` report).

The alignment is jiwer's (the one `score_utterance` counts), on the same normalised text, so each
block's ``Scores`` equal the record's ``sub``/``del``/``ins`` (checked here, not assumed).

CLI, for a run's own evaluation too: ``python -m asr_pe.evaluation.alignment_report
<run>/eval/<set> --manifest <set manifest>`` writes both next to its ``per_utt.jsonl``.
No Lightning or Hydra here.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path
from typing import Mapping, Sequence

import jiwer

from asr_pe.errors import UserError
from asr_pe.io import atomic_write_text

from .scoring import normalize_text

__all__ = ["PRA_NAME", "SPEAKERS_CSV", "SPEAKERS_MD", "align_words", "pra_block", "speaker_rows",
           "speaker_of_utterances", "write_alignment_reports", "main"]

PRA_NAME = "alignments.pra"
SPEAKERS_CSV = "speakers.csv"
SPEAKERS_MD = "speakers.md"
_GAP = "***"


def align_words(ref: str, hyp: str) -> list[tuple[str, str, str]]:
    """(ref word, hyp word, kind) per column; kind ``C``/``S``/``D``/``I``; the missing side is ""."""
    ref_w, hyp_w = normalize_text(ref).split(), normalize_text(hyp).split()
    if not ref_w or not hyp_w:  # jiwer refuses an empty side; the alignment is trivial then
        return [(w, "", "D") for w in ref_w] + [("", w, "I") for w in hyp_w]
    out = jiwer.process_words(" ".join(ref_w), " ".join(hyp_w))
    cols: list[tuple[str, str, str]] = []
    for chunk in out.alignments[0]:
        r = ref_w[chunk.ref_start_idx:chunk.ref_end_idx]
        h = hyp_w[chunk.hyp_start_idx:chunk.hyp_end_idx]
        if chunk.type in ("equal", "substitute"):
            cols += [(a, b, "C" if chunk.type == "equal" else "S") for a, b in zip(r, h)]
        elif chunk.type == "delete":
            cols += [(a, "", "D") for a in r]
        else:  # insert
            cols += [("", b, "I") for b in h]
    return cols


def pra_block(utt_id: str, speaker: str, record: Mapping) -> str:
    """One utterance's block of ``alignments.pra`` (module docstring); checks its counts."""
    cols = align_words(record["ref"], record["hyp"])
    n = {k: sum(c[2] == k for c in cols) for k in "CSDI"}
    if (n["S"], n["D"], n["I"]) != (record["sub"], record["del"], record["ins"]):
        raise AssertionError(f"{utt_id}: alignment {n} disagrees with the scored counts "
                             f"{record['sub']}/{record['del']}/{record['ins']}")
    ref_row, hyp_row, eval_row = [], [], []
    for r, h, kind in cols:
        if kind != "C":  # sclite shows the words of an error in upper case
            r, h = r.upper(), h.upper()
        r, h = r or _GAP, h or _GAP
        width = max(len(r), len(h))
        ref_row.append(r.ljust(width))
        hyp_row.append(h.ljust(width))
        eval_row.append(("" if kind == "C" else kind).ljust(width))
    lines = [f"id: ({speaker}-{utt_id})", f"Scores: (#C #S #D #I) {n['C']} {n['S']} {n['D']} {n['I']}",
             "REF:  " + " ".join(ref_row), "HYP:  " + " ".join(hyp_row), "Eval: " + " ".join(eval_row)]
    return "\n".join(line.rstrip() for line in lines) + "\n\n"


def speaker_of_utterances(utts: Sequence) -> dict[str, str]:
    """Utterance id -> speaker: the manifest's ``speaker``, else the utterance's own id."""
    return {u.id: u.speaker or u.id for u in utts}


def speaker_rows(records: Sequence[Mapping], speaker_of: Mapping[str, str]) -> list[dict]:
    """Pooled counts per speaker, worst WER first, then ``all``."""
    keys = ("utterances", "ref_words", "corr", "sub", "del", "ins", "errors", "ref_chars", "char_errors")
    by: dict[str, dict] = {}
    total = dict.fromkeys(keys, 0)
    for rec in records:
        row = by.setdefault(speaker_of[rec["id"]], dict.fromkeys(keys, 0))
        add = {"utterances": 1, "corr": rec["ref_words"] - rec["sub"] - rec["del"],
               **{k: rec[k] for k in keys if k not in ("utterances", "corr")}}
        for k in keys:
            row[k] += add[k]
            total[k] += add[k]

    def finish(name: str, row: dict) -> dict:
        rate = (lambda e, n: round(100.0 * e / n, 2) if n else float("nan"))
        return {"speaker": name, **row, "wer": rate(row["errors"], row["ref_words"]),
                "cer": rate(row["char_errors"], row["ref_chars"])}

    def worst_first(r: dict) -> tuple:
        nan = math.isnan(r["wer"])  # a speaker without reference words: last
        return (nan, 0.0 if nan else -r["wer"], r["speaker"])

    rows = sorted((finish(s, r) for s, r in by.items()), key=worst_first)
    return rows + [finish("all", total)]


def _speaker_md(rows: Sequence[dict], title: str) -> str:
    head = ["speaker", "utterances", "ref words", "corr", "sub", "del", "ins", "WER %", "CER %"]
    out = [f"# Per speaker — {title}", "",
           "Errors pooled over each speaker's utterances (WER = (sub + del + ins) / ref words), worst first; "
           "the last row is the whole set.", "",
           "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in (r["speaker"], r["utterances"], r["ref_words"], r["corr"],
                                                      r["sub"], r["del"], r["ins"], f"{r['wer']:.2f}",
                                                      f"{r['cer']:.2f}")) + " |")
    return "\n".join(out) + "\n"


def write_alignment_reports(records: Sequence[Mapping], speaker_of: Mapping[str, str], folder: str | Path,
                            title: str) -> list[Path]:
    """Write ``alignments.pra``, ``speakers.csv`` and ``speakers.md`` into ``folder``; returns the paths."""
    folder = Path(folder)
    missing = [r["id"] for r in records if r["id"] not in speaker_of]
    if missing:
        raise UserError(f"{folder}: {len(missing)} scored utterance(s) are not in the manifest given "
                        f"(first: {missing[0]!r}); pass the manifest this set was scored against")
    pra = "".join(pra_block(r["id"], speaker_of[r["id"]], r) for r in records)
    rows = speaker_rows(records, speaker_of)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    paths = [folder / PRA_NAME, folder / SPEAKERS_CSV, folder / SPEAKERS_MD]
    for path, text in zip(paths, (pra, buf.getvalue(), _speaker_md(rows, title))):
        atomic_write_text(path, text)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    from asr_pe.data.manifest import read_manifest
    from asr_pe.evaluation.buckets import read_per_utt

    parser = argparse.ArgumentParser(
        prog="python -m asr_pe.evaluation.alignment_report",
        description="Write alignments.pra (sclite-style, per utterance) and speakers.{csv,md} beside a scored "
                    "set's per_utt.jsonl (a run's eval/<set>/ or score.py's).")
    parser.add_argument("folder", help="the folder holding per_utt.jsonl (e.g. <run>/eval/test)")
    parser.add_argument("--manifest", required=True, help="the manifest the set was scored against (speakers)")
    args = parser.parse_args(argv)
    try:
        per_utt = Path(args.folder) / "per_utt.jsonl"
        if not per_utt.is_file():
            raise UserError(f"{per_utt}: not found; give a folder that evaluate.py or score.py wrote")
        records = read_per_utt(per_utt)
        paths = write_alignment_reports(records, speaker_of_utterances(read_manifest(args.manifest)), args.folder,
                                        Path(args.folder).name)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("written: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
