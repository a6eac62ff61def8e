"""Corpora prepared with lhotse (icefall, k2, NeMo users; 50+ recipes) in and out of our manifests.

lhotse's manifests are JSON lines (``.jsonl`` or ``.jsonl.gz``), read here directly so lhotse is
not a dependency (fields as lhotse 1.x writes them; ``Recording.to_dict``, ``SupervisionSegment.
to_dict``, ``MonoCut.to_dict``)::

    recording    {"id", "sources": [{"type": "file", "channels": [0], "source": <path>}],
                  "sampling_rate", "num_samples", "duration", "channel_ids": [0, ...], ["transforms"]}
    supervision  {"id", "recording_id", "start", "duration", "channel": 0 | [0, 1],
                  "text", "speaker", "language", ["custom"]}
    cut          {"id", "start", "duration", "channel", "supervisions": [...], "recording": {...},
                  "type": "MonoCut" | "MultiCut"}; a supervision's start is relative to its cut

Import (`import_supervisions`, `import_cuts`): one utterance per supervision: ``id`` = the
supervision id, ``audio_filepath`` = the file holding its channel (a relative path taken from the
working directory, as lhotse opens it, and written absolute), ``offset`` = its start in the
recording, ``duration``, ``text``, ``speaker``. Channels: our audio loader averages a file's
channels, so a supervision is taken when it covers every channel of its file (a mono recording, a
stereo recording's both channels, or one channel of a recording stored one file per channel, as
lhotse writes AMI/CHiME arrays); one channel of a multi-channel file (a telephone call's side B)
is an error naming the line, unless ``channels="downmix"`` accepts the average of the file's
channels. Refused too, naming ``<file>:<line>``: sources other than ``file`` (URLs, in-memory
audio, shell commands), recordings with transforms other than resampling (speed perturbation,
volume: not the audio on disk; resampling is what our loader does anyway), mixed cuts, a
supervision outside its recording, unknown recording ids, one id twice with different content.
A supervision without text is left out and counted.

Long-form entries (``longform``): the consecutive supervisions of one recording and channel (sorted
by start) joined into one entry from the first start to the last end, with ``parts`` (the
supervisions, times within the entry) so that `asr_pe.evaluation.in_context` compares them decoded
in context and alone; a run ends where two supervisions overlap or a gap exceeds ``max_gap_s``
(default 2 s: longer silence may hold untranscribed speech that would be scored as insertions),
as TED-LIUM's full talks are cut at unscored speech. Id: the recording id, or
``<recording>-part<k>`` for a recording cut into several runs; speaker: the parts' speaker when
they share one, else the recording id.

Export (`export_lhotse`): one recording per audio file (ids of `asr_pe.data.kaldi_export.
recording_ids`, header read with soundfile), one supervision per utterance on every channel of
its file (what our loader reads), a long-form entry's ``parts`` kept in the supervision's
``custom`` and restored by the import. Written as ``<out>/<stem>_recordings.jsonl.gz`` and
``<out>/<stem>_supervisions.jsonl.gz``, lhotse's naming.

CLI::

    python -m asr_pe.data.lhotse_manifests import --recordings R.jsonl.gz --supervisions S.jsonl.gz \\
        --out exp/ami/manifests/test.jsonl [--longform exp/ami/manifests/test_talks.jsonl] [--max-gap-s 2]
    python -m asr_pe.data.lhotse_manifests import --cuts cuts_test.jsonl.gz --out ...
    python -m asr_pe.data.lhotse_manifests export exp/tedlium3/manifests/test.jsonl --out lhotse_dir/

No Lightning or Hydra here.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from asr_pe.errors import UserError
from asr_pe.io import atomic_write_bytes

from .kaldi_export import recording_ids
from .manifest import ManifestError, Part, Utterance, parse_parts, read_manifest, write_manifest

__all__ = ["LhotseManifestError", "ImportStats", "read_lhotse_jsonl", "import_supervisions", "import_cuts",
           "longform_entries", "export_lhotse", "main"]

log = logging.getLogger(__name__)

CHANNEL_POLICIES = ("error", "downmix")
# seconds a supervision may run past the end of its recording (lhotse's own tolerance is similar)
END_TOLERANCE_S = 0.05
DEFAULT_MAX_GAP_S = 2.0


class LhotseManifestError(UserError, ValueError):
    """A lhotse manifest line the toolkit cannot represent; the message names ``<file>:<line>``."""


@dataclass
class ImportStats:
    supervisions: int = 0
    without_text: int = 0
    downmixed_channel_subsets: int = 0
    examples: list[str] = field(default_factory=list)


def read_lhotse_jsonl(path: str | os.PathLike) -> Iterator[tuple[str, dict]]:
    """(``<file>:<line>``, object) per non-blank line of a ``.jsonl`` or ``.jsonl.gz`` manifest."""
    path = Path(path)
    if not path.is_file():
        raise LhotseManifestError(f"{path}: not found")
    if path.suffix == ".json":
        raise LhotseManifestError(f"{path}: a JSON (not JSON-lines) manifest; write it with lhotse as .jsonl.gz "
                                  f"(e.g. lhotse.load_manifest(p).to_file('x.jsonl.gz'))")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    raise LhotseManifestError(f"{path}:{line_no}: not JSON ({e})") from None
                if not isinstance(obj, dict):
                    raise LhotseManifestError(f"{path}:{line_no}: expected a JSON object")
                yield f"{path}:{line_no}", obj
    except (OSError, EOFError, UnicodeDecodeError) as e:  # gzip.BadGzipFile is an OSError
        raise LhotseManifestError(f"{path}: cannot be read ({e})") from None


def _need(where: str, obj: dict, key: str, kind, what: str):
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise LhotseManifestError(f"{where}: {what} needs '{key}' ({getattr(kind, '__name__', 'a value')}), "
                                  f"got {value!r:.60}")
    return value


def _channels(value, where: str) -> list[int]:
    chans = value if isinstance(value, list) else [value]
    if not chans or not all(isinstance(c, int) and not isinstance(c, bool) for c in chans):
        raise LhotseManifestError(f"{where}: channel must be an int or a list of ints, got {value!r}")
    return sorted(chans)


@dataclass(frozen=True)
class _Recording:
    id: str
    sources: tuple[tuple[tuple[int, ...], str], ...]  # (channels, path) per source
    duration: float
    where: str


def _parse_recording(where: str, rec: dict) -> _Recording:
    rid = _need(where, rec, "id", str, "a recording")
    duration = float(_need(where, rec, "duration", (int, float), "a recording"))
    for t in rec.get("transforms") or []:
        name = t.get("name") if isinstance(t, dict) else None
        if name != "Resample":  # our loader resamples on its own; anything else changes the audio
            raise LhotseManifestError(f"{where}: recording {rid!r} has a {name or t!r} transform (augmented audio, "
                                      "not the file on disk); import the manifests from before augmentation")
    sources = []
    for k, src in enumerate(_need(where, rec, "sources", list, "a recording")):
        if not isinstance(src, dict) or src.get("type") != "file":
            kind = src.get("type") if isinstance(src, dict) else src
            raise LhotseManifestError(f"{where}: recording {rid!r} source {k} is of type {kind!r}; only 'file' "
                                      "sources can be read (fetch URLs, write in-memory or command audio to files)")
        # a relative path is relative to the working directory, as lhotse opens it
        path = os.path.abspath(_need(where, src, "source", str, "a file source"))
        sources.append((tuple(_channels(src.get("channels", [0]), where)), path))
    if not sources:
        raise LhotseManifestError(f"{where}: recording {rid!r} has no sources")
    return _Recording(rid, tuple(sources), duration, where)


def _read_recordings(path: str | os.PathLike) -> dict[str, _Recording]:
    out: dict[str, _Recording] = {}
    for where, obj in read_lhotse_jsonl(path):
        rec = _parse_recording(where, obj)
        if rec.id in out and out[rec.id].sources != rec.sources:
            raise LhotseManifestError(f"{where}: recording id {rec.id!r} again (first: {out[rec.id].where}), "
                                      "with other audio")
        out.setdefault(rec.id, rec)
    return out


def _utterance(where: str, sup: dict, rec: _Recording, offset_base: float, channels_policy: str,
               stats: ImportStats) -> Utterance | None:
    """The utterance of one supervision; ``offset_base``: its cut's start (0 for a supervision manifest)."""
    sid = _need(where, sup, "id", str, "a supervision")
    start = offset_base + float(_need(where, sup, "start", (int, float), "a supervision"))
    duration = float(_need(where, sup, "duration", (int, float), "a supervision"))
    if not (math.isfinite(start) and math.isfinite(duration) and start >= 0 and duration > 0):
        raise LhotseManifestError(f"{where}: supervision {sid!r} has start {start} and duration {duration}")
    if start + duration > rec.duration + END_TOLERANCE_S:
        raise LhotseManifestError(f"{where}: supervision {sid!r} ends at {start + duration:.3f} s, past its "
                                  f"recording {rec.id!r} ({rec.duration:.3f} s, {rec.where})")
    stats.supervisions += 1
    text = sup.get("text")
    if not isinstance(text, str) or not text.strip():
        stats.without_text += 1
        if len(stats.examples) < 5:
            stats.examples.append(f"{where}: supervision {sid!r} has no text")
        return None
    chans = tuple(_channels(sup.get("channel", 0), where))
    # the source that holds exactly these channels, else one that holds them among others
    exact = [p for c, p in rec.sources if c == chans]
    wider = [(c, p) for c, p in rec.sources if set(chans) <= set(c)]
    if exact:
        path = exact[0]
    elif wider and channels_policy == "downmix":
        path = wider[0][1]
        stats.downmixed_channel_subsets += 1
    elif wider:
        raise LhotseManifestError(
            f"{where}: supervision {sid!r} is on channel(s) {list(chans)} of {wider[0][1]}, which holds channels "
            f"{list(wider[0][0])}; the toolkit reads the average of a file's channels (another speaker's side "
            f"would be mixed in): split the channels into files, or pass --channels downmix to accept the average")
    else:
        raise LhotseManifestError(f"{where}: supervision {sid!r} is on channel(s) {list(chans)}, which no one file "
                                  f"of recording {rec.id!r} holds (its files: "
                                  f"{', '.join(f'{p} {list(c)}' for c, p in rec.sources)}); the toolkit reads one file "
                                  "per utterance: mix the channels into one file first")
    speaker = sup.get("speaker") if isinstance(sup.get("speaker"), str) and sup.get("speaker") else None
    parts = None
    custom = sup.get("custom")
    if isinstance(custom, dict) and custom.get("parts"):
        try:
            parts = parse_parts(custom["parts"], duration)
        except ValueError as e:
            raise LhotseManifestError(f"{where}: supervision {sid!r}: custom.parts: {e}") from None
    return Utterance(id=sid, audio_filepath=path, duration=round(duration, 6), text=" ".join(text.split()),
                     offset=round(start, 6), speaker=speaker, parts=parts, source=where)


def _add(out: dict[str, Utterance], where_of: dict[str, str], utt: Utterance, where: str) -> None:
    """One utterance per id; a cut set whose cuts repeat a supervision (windows) gives it once."""
    if utt.id in out:
        if out[utt.id] != utt:
            raise LhotseManifestError(f"{where}: supervision id {utt.id!r} again (first: {where_of[utt.id]}), with "
                                      "other times, text or audio")
        return
    out[utt.id] = utt
    where_of[utt.id] = where


def _finish(out: dict[str, Utterance], stats: ImportStats, what: str) -> list[Utterance]:
    if stats.without_text:
        log.warning("%s: %d of %d supervision(s) without text left out (first: %s)", what, stats.without_text,
                    stats.supervisions, stats.examples[0])
    if stats.downmixed_channel_subsets:
        log.warning("%s: %d supervision(s) on some channels of a multi-channel file read as the average of its "
                    "channels (--channels downmix)", what, stats.downmixed_channel_subsets)
    if not out:
        raise LhotseManifestError(f"{what}: no supervision with text; nothing to import")
    return sorted(out.values(), key=lambda u: (u.audio_filepath, u.offset, u.id))


def import_supervisions(recordings: str | os.PathLike, supervisions: str | os.PathLike, *,
                        channels: str = "error") -> tuple[list[Utterance], ImportStats]:
    """Utterances of a RecordingSet + SupervisionSet pair (module docstring), sorted by file and time."""
    if channels not in CHANNEL_POLICIES:
        raise ValueError(f"channels={channels!r}: choose one of {CHANNEL_POLICIES}")
    recs = _read_recordings(recordings)
    stats, out, where_of = ImportStats(), {}, {}
    for where, sup in read_lhotse_jsonl(supervisions):
        rid = _need(where, sup, "recording_id", str, "a supervision")
        if rid not in recs:
            raise LhotseManifestError(f"{where}: recording id {rid!r} is not in {recordings}")
        utt = _utterance(where, sup, recs[rid], 0.0, channels, stats)
        if utt is not None:
            _add(out, where_of, utt, where)
    return _finish(out, stats, os.fspath(supervisions)), stats


def import_cuts(cuts: str | os.PathLike, *, channels: str = "error") -> tuple[list[Utterance], ImportStats]:
    """Utterances of a CutSet's supervisions (module docstring); cuts without supervisions add nothing."""
    if channels not in CHANNEL_POLICIES:
        raise ValueError(f"channels={channels!r}: choose one of {CHANNEL_POLICIES}")
    stats, out, where_of = ImportStats(), {}, {}
    for where, cut in read_lhotse_jsonl(cuts):
        kind = cut.get("type", "MonoCut")
        if kind not in ("MonoCut", "MultiCut"):
            raise LhotseManifestError(f"{where}: a {kind} (mixed or padded audio, data augmentation) is not a span "
                                      "of one recording; import the cuts from before mixing")
        rec = _parse_recording(where, _need(where, cut, "recording", dict, "a cut"))
        cut_start = float(_need(where, cut, "start", (int, float), "a cut"))
        for sup in cut.get("supervisions") or []:
            utt = _utterance(where, sup, rec, cut_start, channels, stats)
            if utt is not None:
                _add(out, where_of, utt, where)
    return _finish(out, stats, os.fspath(cuts)), stats


def longform_entries(utts: Sequence[Utterance], max_gap_s: float = DEFAULT_MAX_GAP_S) -> list[Utterance]:
    """Long-form entries from runs of consecutive utterances of one file (module docstring)."""
    by_file: dict[str, list[Utterance]] = defaultdict(list)
    for u in utts:
        by_file[u.audio_filepath].append(u)
    rec_of = recording_ids(utts)
    out: list[Utterance] = []
    for path, members in by_file.items():
        members = sorted(members, key=lambda u: (u.offset, u.id))
        runs: list[list[Utterance]] = [[members[0]]]
        for u in members[1:]:
            end = max(p.offset + p.duration for p in runs[-1])
            if u.offset < end - 1e-6 or u.offset - end > max_gap_s:  # overlap (two speakers) or a long gap
                runs.append([])
            runs[-1].append(u)
        rec = rec_of[members[0].id]
        for k, run in enumerate(runs, 1):
            first, last = run[0].offset, max(u.offset + u.duration for u in run)
            speakers = {u.speaker for u in run}
            out.append(Utterance(
                id=rec if len(runs) == 1 else f"{rec}-part{k}", audio_filepath=path, duration=round(last - first, 6),
                text=" ".join(u.text for u in run), offset=first,
                speaker=speakers.pop() if len(speakers) == 1 and None not in speakers else rec,
                parts=tuple(Part(u.id, round(u.offset - first, 6), round(u.offset + u.duration - first, 6))
                            for u in run)))
    return out


def _gz_jsonl(objs: Sequence[dict]) -> bytes:
    # mtime=0: the same manifest gives the same bytes
    return gzip.compress("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs).encode(), mtime=0)


def export_lhotse(utts: Sequence[Utterance], out_dir: str | os.PathLike, stem: str) -> tuple[Path, Path]:
    """Write ``<out_dir>/<stem>_recordings.jsonl.gz`` and ``<stem>_supervisions.jsonl.gz``."""
    import soundfile as sf

    rec_of = recording_ids(utts)
    recordings: dict[str, dict] = {}
    n_channels: dict[str, int] = {}
    for u in utts:
        rid = rec_of[u.id]
        if rid in recordings:
            continue
        try:
            info = sf.info(u.audio_filepath)
        except (RuntimeError, OSError) as e:
            raise LhotseManifestError(f"{u.source or u.id}: cannot read the header of {u.audio_filepath} ({e})") from None
        chans = list(range(info.channels))
        n_channels[rid] = info.channels
        recordings[rid] = {"id": rid, "sources": [{"type": "file", "channels": chans,
                                                   "source": os.path.abspath(u.audio_filepath)}],
                           "sampling_rate": info.samplerate, "num_samples": info.frames,
                           "duration": info.frames / info.samplerate, "channel_ids": chans}
    sups = []
    for u in utts:
        rid = rec_of[u.id]
        sup = {"id": u.id, "recording_id": rid, "start": u.offset, "duration": u.duration,
               # our loader averages every channel of the file: the supervision is on all of them
               "channel": 0 if n_channels[rid] == 1 else list(range(n_channels[rid])), "text": u.text}
        if u.speaker is not None:
            sup["speaker"] = u.speaker
        if u.parts:
            sup["custom"] = {"parts": [p.to_json() for p in u.parts]}
        sups.append(sup)
    out_dir = Path(out_dir)
    paths = (out_dir / f"{stem}_recordings.jsonl.gz", out_dir / f"{stem}_supervisions.jsonl.gz")
    atomic_write_bytes(paths[0], _gz_jsonl(list(recordings.values())))
    atomic_write_bytes(paths[1], _gz_jsonl(sups))
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asr_pe.data.lhotse_manifests",
                                     description="lhotse manifests in and out of the toolkit's manifests.")
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser("import", help="lhotse recordings + supervisions (or cuts) -> a manifest .jsonl")
    imp.add_argument("--recordings", help="RecordingSet .jsonl(.gz)")
    imp.add_argument("--supervisions", help="SupervisionSet .jsonl(.gz)")
    imp.add_argument("--cuts", help="CutSet .jsonl(.gz) (instead of --recordings and --supervisions)")
    imp.add_argument("--out", required=True, help="the manifest to write, one utterance per supervision")
    imp.add_argument("--longform", default=None,
                     help="also write this manifest: runs of consecutive supervisions of each recording, with parts")
    imp.add_argument("--max-gap-s", type=float, default=DEFAULT_MAX_GAP_S,
                     help="a longer gap between two supervisions ends a long-form run (seconds)")
    imp.add_argument("--channels", choices=CHANNEL_POLICIES, default="error",
                     help="a supervision on some channels of a multi-channel file: an error, or read as the "
                          "average of the file's channels")
    exp = commands.add_parser("export", help="manifest .jsonl -> lhotse <stem>_{recordings,supervisions}.jsonl.gz")
    exp.add_argument("manifests", nargs="+", help="manifest .jsonl files")
    exp.add_argument("--out", required=True, help="folder for the lhotse manifests")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        if args.command == "import":
            if bool(args.cuts) == bool(args.recordings or args.supervisions) or (
                    not args.cuts and not (args.recordings and args.supervisions)):
                parser.error("give --cuts, or --recordings and --supervisions")
            if args.max_gap_s < 0:
                parser.error(f"--max-gap-s {args.max_gap_s}: must be >= 0")
            if args.cuts:
                utts, stats = import_cuts(args.cuts, channels=args.channels)
            else:
                utts, stats = import_supervisions(args.recordings, args.supervisions, channels=args.channels)
            long = longform_entries(utts, args.max_gap_s) if args.longform else None
            write_manifest(args.out, utts)
            print(f"{args.out}: {len(utts)} utterances of {len({u.audio_filepath for u in utts})} files "
                  f"({sum(u.duration for u in utts) / 3600:.2f} h; {stats.without_text} supervision(s) without "
                  f"text left out)")
            if long is not None:
                write_manifest(args.longform, long)
                print(f"{args.longform}: {len(long)} long-form entries, {min(u.duration for u in long):.1f}-"
                      f"{max(u.duration for u in long):.1f} s")
        else:
            sets = {}
            for path in args.manifests:  # read every manifest before writing anything
                stem = Path(path).name.removesuffix(".jsonl")
                if stem in sets:
                    raise LhotseManifestError(f"{path}: two manifests named {stem!r}")
                sets[stem] = read_manifest(path)
            for stem, utts in sets.items():
                paths = export_lhotse(utts, args.out, stem)
                print(f"{paths[0]}, {paths[1]}: {len(utts)} supervisions")
    except (LhotseManifestError, ManifestError, UserError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
