"""Export test manifests as Kaldi data directories, so another toolkit decodes the identical sets.

NeMo reads the manifests as they are (JSON lines with ``audio_filepath``, ``duration``,
``text``, ``offset``; the extra ``id``/``speaker`` keys are carried through to its output).
ESPnet (``asr_inference.py --data_path_and_name_and_type <dir>/wav.scp,speech,sound``),
icefall/lhotse (``lhotse kaldi import``) and Kaldi itself read a data directory:

- ``wav.scp``   ``<recording-id> <audio path>`` (absolute), or with ``wav_format="sox"`` a pipe
  ``<recording-id> sox <path> -t wav -r 16000 -c 1 -b 16 - |`` for Kaldi binaries, which read
  only RIFF WAV while the corpora are FLAC (LibriSpeech) and SPHERE (TED-LIUM);
- ``segments``  ``<utt-id> <recording-id> <start> <end>`` (seconds, ms precision): always written,
  because a TED-LIUM segment is a span of a talk's SPHERE file (the manifest's ``offset``);
- ``text``      ``<utt-id> <reference words>``;
- ``utt2spk`` / ``spk2utt``, ``utt2dur``.

Recording ids: an audio file that holds exactly one utterance of the set, starting at 0, is
recorded under that utterance's id (a long-form recording, a LibriSpeech file), so a CTM
written per recording or per utterance names the same thing; so is a file whose one utterance
bears the file's own name (a whole TED talk of ``test_talks``: ``<talk>`` from its first scored
segment, in ``<talk>.sph``), so that a talk-level CTM keyed ``<talk>``, as a system decoding the
talk's file writes it, names the recording. A file holding several utterances (a TED talk's
segments, or the parts of a talk cut at unscored speech) is recorded under its file stem (``-2``,
``-3``, ... appended where two files share a stem or the stem is another utterance's id).
`recording_ids` is the one definition; ``asr_pe.evaluation.external_scoring`` uses it to map a
recording-level CTM back onto the utterances.

Speakers: Kaldi's files must sort the same by utterance and by speaker, which holds when every
utterance id starts with its speaker id. The manifest's ``speaker`` is used where that is so
(LibriSpeech ``1089-134686-0000`` of ``1089-134686``, TED-LIUM segments of their talk); an
utterance whose id does not start with its speaker is its own speaker (the usual fallback, and
what long-form recordings get). Files are sorted as ``LC_ALL=C sort`` would (code points).

CLI::

    python -m asr_pe.data.kaldi_export exp/tedlium3/manifests/test_long.jsonl ... --out exp/tedlium3/kaldi

writes ``<out>/<manifest stem>/`` per manifest. No Lightning or Hydra here.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Sequence

from asr_pe.errors import UserError
from asr_pe.io import atomic_write_text

from .manifest import ManifestError, Utterance, read_manifest

__all__ = ["KaldiExportError", "WAV_FORMATS", "recording_ids", "speaker_ids", "kaldi_files", "export_kaldi_dir",
           "main"]

log = logging.getLogger(__name__)

WAV_FORMATS = ("path", "sox")


class KaldiExportError(UserError, ValueError):
    """A manifest that cannot be written as a Kaldi data directory (whitespace in an id or path)."""


def _check_token(kind: str, value: str, utt: Utterance) -> None:
    if not value or any(c.isspace() for c in value):
        where = f" ({utt.source})" if utt.source else ""
        raise KaldiExportError(f"utterance {utt.id!r}{where}: its {kind} {value!r} holds whitespace, which a Kaldi "
                               f"data directory cannot represent; give it an id without spaces in the manifest")


def recording_ids(utts: Sequence[Utterance]) -> dict[str, str]:
    """Utterance id -> recording id (module docstring: the utterance's own id for a file it fills
    alone from 0, else the file stem, made unique)."""
    by_file: dict[str, list[Utterance]] = defaultdict(list)
    for u in utts:
        by_file[u.audio_filepath].append(u)
    utt_ids = {u.id for u in utts}
    taken: set[str] = set()
    file_id: dict[str, str] = {}
    for path, members in by_file.items():  # first appearance order: deterministic
        if len(members) == 1 and (members[0].offset == 0 or members[0].id == Path(path).stem):
            file_id[path] = members[0].id
            taken.add(members[0].id)
    for path, members in by_file.items():
        if path in file_id:
            continue
        stem, n = Path(path).stem, 1
        name = stem
        while name in taken or name in utt_ids:
            n += 1
            name = f"{stem}-{n}"
        file_id[path] = name
        taken.add(name)
    return {u.id: file_id[u.audio_filepath] for u in utts}


def speaker_ids(utts: Sequence[Utterance]) -> dict[str, str]:
    """Utterance id -> Kaldi speaker id: the manifest's speaker when the id starts with it, else the id."""
    return {u.id: u.speaker if u.speaker and u.id.startswith(u.speaker) else u.id for u in utts}


def _wav_entry(path: str, wav_format: str) -> str:
    if wav_format == "path":
        return path
    return f"sox {path} -t wav -r 16000 -c 1 -b 16 - |"


def kaldi_files(utts: Sequence[Utterance], wav_format: str = "path") -> dict[str, str]:
    """The text of each file of the data directory ({"wav.scp": ..., "segments": ..., ...})."""
    if wav_format not in WAV_FORMATS:
        raise KaldiExportError(f"wav format {wav_format!r}: choose one of {WAV_FORMATS}")
    dup = [i for i, n in Counter(u.id for u in utts).items() if n > 1]
    if dup:
        raise KaldiExportError(f"duplicate utterance id(s) {dup[:5]}: Kaldi ids must be unique")
    rec, spk = recording_ids(utts), speaker_ids(utts)
    for u in utts:
        _check_token("id", u.id, u)
        _check_token("audio path", os.path.abspath(u.audio_filepath), u)
        _check_token("speaker", spk[u.id], u)
    ordered = sorted(utts, key=lambda u: u.id)
    wav = {rec[u.id]: os.path.abspath(u.audio_filepath) for u in utts}
    spk2utt: dict[str, list[str]] = defaultdict(list)
    for u in ordered:
        spk2utt[spk[u.id]].append(u.id)

    def lines(rows):
        return "".join(f"{r}\n" for r in rows)

    return {
        "wav.scp": lines(f"{r} {_wav_entry(wav[r], wav_format)}" for r in sorted(wav)),
        "segments": lines(f"{u.id} {rec[u.id]} {u.offset:.3f} {u.offset + u.duration:.3f}" for u in ordered),
        # a reference is one line: newlines inside it would start a new utterance
        "text": lines(f"{u.id} {' '.join(u.text.split())}" for u in ordered),
        "utt2spk": lines(f"{u.id} {spk[u.id]}" for u in ordered),
        "spk2utt": lines(f"{s} {' '.join(ids)}" for s, ids in sorted(spk2utt.items())),
        "utt2dur": lines(f"{u.id} {u.duration:.3f}" for u in ordered),
    }


def export_kaldi_dir(utts: Sequence[Utterance], out_dir: str | os.PathLike, wav_format: str = "path") -> Path:
    """Write the data directory (each file atomically); returns ``out_dir``."""
    files = kaldi_files(utts, wav_format)  # every check before the first file is written
    out_dir = Path(out_dir)
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
    return out_dir


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m asr_pe.data.kaldi_export",
        description="Write each manifest as a Kaldi data directory <out>/<manifest stem>/ (wav.scp, segments, "
                    "text, utt2spk, spk2utt, utt2dur) for ESPnet, icefall/lhotse or Kaldi.")
    parser.add_argument("manifests", nargs="+", help="manifest .jsonl files (e.g. <work_dir>/manifests/test_long.jsonl)")
    parser.add_argument("--out", required=True, help="folder that receives one data directory per manifest")
    parser.add_argument("--wav-format", choices=WAV_FORMATS, default="path",
                        help="path: audio paths as they are (ESPnet, lhotse read FLAC/SPHERE/WAV); "
                             "sox: a 'sox ... |' pipe to 16 kHz WAV for Kaldi binaries")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        sets = {}
        for path in args.manifests:  # read and check every manifest before writing anything
            name = Path(path).name.removesuffix(".jsonl")
            if name in sets:
                raise KaldiExportError(f"{path}: two manifests named {name!r} would share {args.out}/{name}")
            utts = read_manifest(path)
            if not utts:
                raise KaldiExportError(f"{path}: no utterances")
            kaldi_files(utts, args.wav_format)
            sets[name] = utts
        for name, utts in sets.items():
            out = export_kaldi_dir(utts, Path(args.out) / name, args.wav_format)
            n_rec = len(set(recording_ids(utts).values()))
            print(f"{out}: {len(utts)} utterances, {n_rec} recordings, "
                  f"{sum(u.duration for u in utts) / 3600:.2f} h")
    except (ManifestError, KaldiExportError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
