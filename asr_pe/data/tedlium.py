"""TED-LIUM release 3 (OpenSLR resource 51): download, extract and manifests from the STM files.

Release layout (``TEDLIUM_release-3.tgz`` unpacks to ``TEDLIUM_release-3/``)::

    data/{sph,stm}/                          all 2351 training talks (452 h), TED-LIUM 3 audio
    legacy/train/{sph,stm}/                  symbolic links to those same 2351 talks in data/
    legacy/{dev,test}/{sph,stm}/             the 19 talks (8 dev + 11 test) of TED-LIUM 1 and 2,
                                             used by every TED-LIUM paper
    speaker-adaptation/{train,dev,test}/{sph,stm}/   a split designed for speaker adaptation
    doc/  LM/  TEDLIUM.152k.dic  readme.txt

Subsets (``subset=``): ``legacy`` (default; the comparable dev/test sets), ``speaker-adaptation``
(same per-split layout), and ``full`` (train read from ``data/`` instead of through the
``legacy/train`` links, dev/test from ``legacy/``): the same talks and the same manifests as
``legacy`` (audio paths are resolved through the links); it only helps when an extraction tool
dropped the links.

STM line: ``<talk> <channel> <speaker> <start> <end> <label> <transcript...>``. The official
files have no header; ``;;`` comment lines (sclite's STM header, which Kaldi adds) are skipped.
Three kinds of line occur in a talk's STM file:
- scored speech: ``AimeeMullins_2009P 1 AimeeMullins 17.82 28.81 <o,f0,female> i 'd like ...``
  (the speaker field is the speaker's name, not the talk id);
- gaps: ``<talk> 1 inter_segment_gap <start> <end> <o,,unknown> ignore_time_segment_in_scoring``
  between scored segments, before the first and after the last: applause, music, pauses; no
  speech of the talk is missing from the reference there;
- unscored speech: any other line whose transcript is ``ignore_time_segment_in_scoring`` (the
  talk's own speaker, or another name such as sclite's ``excluded_region``): speech that was not
  transcribed, so the audio holds words the reference lacks.

Manifest entries point into the talk's ``.sph`` file (NIST SPHERE, 16 kHz, 16-bit) with
``offset`` = start and ``duration`` = end - start; ``speaker`` = talk id (one talk is one
speaker and the long-form grouping unit).

Excluded from the segment manifests (counted and logged, reported in the returned stats):
- gap lines and unscored-speech lines (excluded from scoring in the official setups too);
- segments whose transcript is empty after normalisation (e.g. only ``<unk>`` or ``{NOISE}``);
- segments starting past the end of the audio; an end that overruns the audio is clipped.

Text normalisation (following Kaldi egs/tedlium/s5_r3 local/prepare_data.sh + join_suffix.py):
1. a trailing ``(<utterance name>)`` token (TED-LIUM 1 style) is dropped;
2. pronunciation-variant marks ``word(2)`` -> ``word``;
3. lower case;
4. ``<unk>``, ``<sil>`` and every other tag token (``<...>``, ``{...}`` such as ``{NOISE}``,
   ``[...]``) are removed;
5. tokens starting with an apostrophe are joined to the previous word: the TED-LIUM
   tokenisation ``it 's`` / ``don 't`` becomes ``it's`` / ``don't``;
6. white space collapsed.

Full-talk long-form sets (``<split>_talks.jsonl``): one entry per talk spanning its scored
segments from the first start to the last end, transcripts joined in time order; gaps (lines or
no line at all) stay in the audio. Unscored speech inside that span would be scored as insertions
the model cannot avoid, and leaving the talk out would lose it: such a talk is cut at each
unscored-speech region into parts (``<talk>-part<k>``, each a maximal run of scored segments
with no unscored speech inside its span; counted as ``talks_split_at_unscored_speech``). A scored
segment that itself overlaps unscored speech ends the run and is left out of the full-talk set
(``segments_overlapping_unscored_speech``). Segments empty after normalisation do not cut a talk:
like the ``<unk>`` tokens removed inside scored segments, they hold at most unknown words.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from asr_pe.errors import MissingFileError, UserError
from asr_pe.io import atomic_write_json

from .corpus_cli import Archive, corpus_parser, download_options, fetch_archives, run_corpus_cli
from .download import extract
from .corpus_manifests import audio_seconds, prepared_manifests
from .manifest import Part, Utterance, read_manifest, write_manifest

__all__ = [
    "TEDLIUM_ARCHIVE",
    "TEDLIUM_MIRRORS",
    "TEDLIUM_SUBSETS",
    "TedliumError",
    "download_tedlium",
    "extract_tedlium",
    "normalize_tedlium_text",
    "parse_stm",
    "prepare_tedlium",
    "tedlium_manifests",
]

log = logging.getLogger(__name__)

IGNORE_TRANSCRIPT = "ignore_time_segment_in_scoring"
GAP_SPEAKER = "inter_segment_gap"
# Written into <split>.stats.json: manifests from an older preparation (which dropped every talk
# of the official dev/test STM files) are regenerated instead of being reused.
PREPARE_VERSION = 2

TEDLIUM_ARCHIVE = "TEDLIUM_release-3.tgz"
TEDLIUM_DIRNAME = "TEDLIUM_release-3"
# sha256 as shipped by torchaudio (torchaudio/datasets/tedlium.py, "release3"). OpenSLR's md5 for
# resource 51 is not recorded here (not known to us with certainty): md5 verification is skipped.
TEDLIUM_SHA256: str | None = "ad1e454d14d1ad550bc2564c462d87c7a7ec83d4dc2b9210f22ab4973b9eccdb"
TEDLIUM_MD5: str | None = None
TEDLIUM_MIRRORS: dict[str, str] = {
    "openslr": "https://www.openslr.org/resources/51",
    "us": "https://us.openslr.org/resources/51",
    "eu": "https://openslr.elda.org/resources/51",
    "cn": "https://openslr.magicdatatech.com/resources/51",
    "lium": "https://projets-lium.univ-lemans.fr/wp-content/uploads/corpus/TED-LIUM",
}
TEDLIUM_SUBSETS = ("legacy", "speaker-adaptation", "full")
SPLITS = ("train", "dev", "test")

_TAG = re.compile(r"^(<[^>]*>|\{[^}]*\}|\[[^\]]*\])$")
_VARIANT = re.compile(r"\(\d+\)")
_UTT_NAME = re.compile(r"^\([^()\s]*\)$")


class TedliumError(UserError, ValueError):
    """The corpus tree is not in the official layout, or an STM line is malformed (file:line)."""


@dataclass(frozen=True)
class StmSegment:
    talk: str
    channel: str
    speaker: str
    start: float
    end: float
    label: str
    transcript: str  # raw, as in the file
    source: str  # "<stm>:<line>"

    @property
    def ignored(self) -> bool:
        return self.transcript.strip() == IGNORE_TRANSCRIPT

    @property
    def is_gap(self) -> bool:
        # sclite compares the speaker field with "inter_segment_gap" case-insensitively
        return self.speaker.lower() == GAP_SPEAKER


def normalize_tedlium_text(transcript: str) -> str:
    """Apply the normalisation of the module docstring; may return ""."""
    tokens = transcript.split()
    if tokens and _UTT_NAME.match(tokens[-1]):
        tokens = tokens[:-1]
    words: list[str] = []
    for token in tokens:
        token = _VARIANT.sub("", token).lower()
        if not token or _TAG.match(token):
            continue
        if token.startswith("'") and words:
            words[-1] += token
        else:
            words.append(token)
    return " ".join(words)


def parse_stm(path: str | os.PathLike) -> list[StmSegment]:
    """All segments of one STM file; a malformed line raises TedliumError naming file and line."""
    path = Path(path)
    segments = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip() or line.startswith(";;"):
                continue
            fields = line.split(None, 6)
            where = f"{path}:{line_no}"
            if len(fields) < 6:
                raise TedliumError(
                    f"{where}: expected '<talk> <channel> <speaker> <start> <end> <label> <transcript>', "
                    f"got {line.strip()[:80]!r}"
                )
            talk, channel, speaker, start, end, label = fields[:6]
            transcript = fields[6].strip() if len(fields) == 7 else ""
            try:
                t0, t1 = float(start), float(end)
            except ValueError:
                raise TedliumError(f"{where}: start/end times {start!r} {end!r} are not numbers") from None
            if not (t0 >= 0 and t1 >= t0):
                raise TedliumError(f"{where}: bad segment times start={t0} end={t1}")
            if not (label.startswith("<") and label.endswith(">")):
                raise TedliumError(f"{where}: expected a '<...>' label in field 6, got {label!r}")
            segments.append(StmSegment(talk, channel, speaker, t0, t1, label, transcript, where))
    return segments


@dataclass
class SplitStats:
    """What ``prepare_tedlium`` kept and why it dropped the rest (written beside the manifests)."""

    talks: int = 0
    segments: int = 0
    hours: float = 0.0
    inter_segment_gaps: int = 0
    unscored_speech_segments: int = 0
    empty_after_normalisation: int = 0
    zero_length_segments: int = 0
    past_end_of_audio: int = 0
    clipped_to_audio_end: int = 0
    full_talks: int = 0
    full_talk_hours: float = 0.0
    talks_split_at_unscored_speech: int = 0
    segments_overlapping_unscored_speech: int = 0
    prepare_version: int = PREPARE_VERSION
    examples: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(what)


def _split_dirs(corpus: Path, subset: str, split: str) -> tuple[Path, Path]:
    if subset not in TEDLIUM_SUBSETS:
        raise ValueError(f"unknown TED-LIUM subset {subset!r}; choose from {TEDLIUM_SUBSETS}")
    if subset == "full":
        base = corpus / "data" if split == "train" else corpus / "legacy" / split
    else:
        base = corpus / subset / split
    return base / "sph", base / "stm"


def _corpus_dir(root: Path) -> Path:
    return root / TEDLIUM_DIRNAME if (root / TEDLIUM_DIRNAME).is_dir() else root


def _segment_id(talk: str, start: float, end: float) -> str:
    # Kaldi-style <talk>-<start cs>-<end cs>: unique within a talk and sorts in time order.
    return f"{talk}-{round(start * 100):07d}-{round(end * 100):07d}"


def _overlaps(a_start: float, a_end: float, b_start: float, b_end: float) -> bool:
    # Strict: the official files put a gap or another segment exactly at a segment's end.
    return a_start < b_end and a_end > b_start


def _full_talk_runs(
    scored: list[tuple[float, float, str]], unscored: list[tuple[float, float]], stats: SplitStats, talk: str
) -> list[list[tuple[float, float, str]]]:
    """Maximal runs of time-ordered scored segments whose span holds no unscored speech."""
    runs: list[list[tuple[float, float, str]]] = []
    current: list[tuple[float, float, str]] = []
    for seg in scored:
        start, end, _ = seg
        if any(_overlaps(start, end, s, e) for s, e in unscored):
            stats.segments_overlapping_unscored_speech += 1
            stats.note(f"{talk}: scored segment {start}-{end}s overlaps unscored speech; not in the full-talk set")
            if current:
                runs.append(current)
            current = []
            continue
        if current:
            first, last = current[0][0], max(e for _, e, _ in current)
            if any(_overlaps(first, max(last, end), s, e) for s, e in unscored):
                runs.append(current)
                current = []
        current.append(seg)
    if current:
        runs.append(current)
    return runs


def _prepare_split(sph_dir: Path, stm_dir: Path) -> tuple[list[Utterance], list[Utterance], SplitStats]:
    stats = SplitStats()
    stms = sorted(stm_dir.glob("*.stm"))
    if not stms:
        raise TedliumError(f"{stm_dir}: no .stm files (is this an extracted TED-LIUM 3 tree?)")
    segments_out: list[Utterance] = []
    talks_out: list[Utterance] = []
    for stm in stms:
        talk = stm.stem
        sph = sph_dir / f"{talk}.sph"
        if not sph.is_file():
            if sph.is_symlink():  # legacy/train holds links into data/
                raise TedliumError(
                    f"{stm}: audio file {sph} is a link to {os.readlink(sph)}, which does not exist "
                    f"(extract the whole {TEDLIUM_ARCHIVE}, or prepare with --subset full to read data/ directly)"
                )
            raise TedliumError(f"{stm}: audio file missing: {sph}")
        audio_end = audio_seconds(sph, TedliumError)
        scored: list[tuple[float, float, str]] = []
        unscored: list[tuple[float, float]] = []
        for seg in sorted(parse_stm(stm), key=lambda s: (s.start, s.end)):
            if seg.talk != talk:
                raise TedliumError(f"{seg.source}: talk id {seg.talk!r} does not match the file name {talk!r}")
            if seg.is_gap:
                stats.inter_segment_gaps += 1
                continue
            if seg.ignored:
                stats.unscored_speech_segments += 1
                stats.note(f"{seg.source}: unscored speech of {seg.speaker!r} at {seg.start}-{seg.end}s")
                unscored.append((seg.start, seg.end))
                continue
            text = normalize_tedlium_text(seg.transcript)
            if not text:
                stats.empty_after_normalisation += 1
                stats.note(f"{seg.source}: empty after normalisation: {seg.transcript!r}")
                continue
            if seg.start >= audio_end:
                stats.past_end_of_audio += 1
                stats.note(f"{seg.source}: starts at {seg.start}s, audio ends at {audio_end:.2f}s")
                continue
            end = seg.end
            if end > audio_end:
                stats.clipped_to_audio_end += 1
                end = audio_end
            if end - seg.start <= 0:
                stats.zero_length_segments += 1
                stats.note(f"{seg.source}: zero-length segment")
                continue
            scored.append((seg.start, end, text))
        if not scored:
            log.warning("%s: no scored segments", stm)
            continue
        stats.talks += 1
        seen: set[str] = set()
        for start, end, text in scored:
            uid = _segment_id(talk, start, end)
            if uid in seen:
                raise TedliumError(f"{stm}: two scored segments with the same times {start}-{end} ({uid})")
            seen.add(uid)
            segments_out.append(
                Utterance(
                    id=uid,
                    audio_filepath=str(sph.resolve()),
                    duration=round(end - start, 6),
                    text=text,
                    offset=start,
                    speaker=talk,
                )
            )
        runs = _full_talk_runs(scored, unscored, stats, talk)
        if len(runs) > 1:
            stats.talks_split_at_unscored_speech += 1
        for k, run in enumerate(runs, 1):
            first, last = run[0][0], max(e for _, e, _ in run)
            talks_out.append(
                Utterance(
                    id=talk if len(runs) == 1 else f"{talk}-part{k}",
                    audio_filepath=str(sph.resolve()),
                    duration=round(last - first, 6),
                    text=" ".join(t for _, _, t in run),
                    offset=first,
                    speaker=talk,
                    # the scored segments inside the talk, so that the talk decoded whole can be
                    # compared with the same segments decoded alone (evaluation/in_context.py)
                    parts=tuple(Part(_segment_id(talk, s, e), round(s - first, 6), round(e - first, 6))
                                for s, e, _ in run),
                )
            )
    stats.segments = len(segments_out)
    stats.hours = sum(u.duration for u in segments_out) / 3600
    stats.full_talks = len(talks_out)
    stats.full_talk_hours = sum(u.duration for u in talks_out) / 3600
    return segments_out, talks_out, stats


def describe_talk_set(name: str, talks: Sequence[Utterance]) -> str:
    """One line saying what a ``<split>_talks`` set holds: whole talks and parts of talks.

    An entry ``<talk>-part<k>`` is a stretch of a talk between unscored speech, not a talk: a
    6.8 s part lands in the 4-8 s bucket of the results, beside whole talks in 512-1024 s."""
    def span(utts):
        return f"{min(u.duration for u in utts):.1f}-{max(u.duration for u in utts):.1f} s" if utts else "none"

    parts = [u for u in talks if re.search(r"-part\d+$", u.id)]
    part_ids = {u.id for u in parts}
    whole = [u for u in talks if u.id not in part_ids]
    cut = len({u.speaker for u in parts})
    return (f"{name}: {len(talks)} entries = {len(whole)} whole talks ({span(whole)}) + {len(parts)} parts of "
            f"{cut} talk(s) cut at unscored speech ({span(parts)})")


def _has_entries(manifest: Path) -> bool:
    """True when the manifest holds at least one non-blank line (reads no further)."""
    try:
        with open(manifest, encoding="utf-8") as f:
            return any(line.strip() for line in f)
    except OSError:
        return False


def _reusable(seg_path: Path, talk_path: Path, stats_path: Path) -> dict | None:
    """The stats of an earlier preparation of this split, or None when it must be redone.

    Redone when a file is missing, a manifest is empty (an interrupted or older run: never
    handed on to training or evaluation) or the stats come from an older preparation.
    """
    if not (seg_path.exists() and talk_path.exists() and stats_path.exists()):
        return None
    try:
        stats = json.loads(stats_path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stats, dict) or stats.get("prepare_version") != PREPARE_VERSION:
        log.info("%s is from an older preparation; preparing the split again", stats_path)
        return None
    for manifest in (seg_path, talk_path):
        if not _has_entries(manifest):
            log.info("%s is empty; preparing the split again", manifest)
            return None
    return stats


def prepare_tedlium(
    root: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    subset: str = "legacy",
    splits: Iterable[str] = SPLITS,
    overwrite: bool = False,
) -> dict[str, dict]:
    """Write ``<out_dir>/<split>.jsonl`` (segments) and ``<split>_talks.jsonl`` (full talks).

    ``root`` holds ``TEDLIUM_release-3/`` (or is that folder). Also writes
    ``<split>.stats.json`` with the counts of the module docstring. Existing manifests are kept
    unless ``overwrite``. Returns ``{split: {"segments": path, "talks": path, "stats": dict}}``.
    """
    corpus = _corpus_dir(Path(root))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, dict] = {}
    splits = [splits] if isinstance(splits, str) else list(splits)
    for split in splits:
        if split not in SPLITS:
            raise ValueError(f"unknown TED-LIUM split {split!r}; choose from {SPLITS}")
        seg_path, talk_path = out_dir / f"{split}.jsonl", out_dir / f"{split}_talks.jsonl"
        stats_path = out_dir / f"{split}.stats.json"
        earlier = None if overwrite else _reusable(seg_path, talk_path, stats_path)
        if earlier is not None:
            log.info("%s exists; skipping %s", seg_path, split)
            log.info("  %s", describe_talk_set(talk_path.stem, read_manifest(talk_path)))
            result[split] = {"segments": seg_path, "talks": talk_path, "stats": earlier}
            continue
        sph_dir, stm_dir = _split_dirs(corpus, subset, split)
        if not stm_dir.is_dir() or not sph_dir.is_dir():
            hint = f"extract {TEDLIUM_ARCHIVE} first"
            if subset == "legacy" and split == "train" and (corpus / "data" / "stm").is_dir():
                # legacy/train is only links into data/: some extraction tools drop links
                hint = "it holds links to data/, which this extraction lacks: use --subset full (same talks)"
            raise TedliumError(f"{stm_dir.parent}: expected sph/ and stm/ folders ({hint})")
        segments, talks, stats = _prepare_split(sph_dir, stm_dir)
        # Never hand an empty manifest on: later stages would fail far from the cause.
        dropped = (
            f"{stats.inter_segment_gaps} inter_segment_gap lines, {stats.unscored_speech_segments} "
            f"unscored-speech lines, {stats.empty_after_normalisation} empty after normalisation, "
            f"{stats.past_end_of_audio} past the end of the audio, {stats.zero_length_segments} zero length"
        )
        if not segments:
            raise TedliumError(
                f"{stm_dir}: no scored segment in any of its .stm files ({dropped}); {split} manifests not written"
            )
        if not talks:
            raise TedliumError(
                f"{stm_dir}: {len(segments)} scored segments but no full-talk entry (every one overlaps "
                f"unscored speech); {split} manifests not written"
            )
        write_manifest(seg_path, segments)
        write_manifest(talk_path, talks)
        atomic_write_json(stats_path, stats.__dict__)  # last: its presence marks the split done
        log.info(
            "%s/%s: %d talks, %d segments (%.2f h); not in the segment set: %s; "
            "%d full-talk entries (%.2f h), %d talks cut into parts at unscored speech, "
            "%d segments left out of the full-talk set because they overlap unscored speech",
            subset, split, stats.talks, stats.segments, stats.hours, dropped,
            stats.full_talks, stats.full_talk_hours, stats.talks_split_at_unscored_speech,
            stats.segments_overlapping_unscored_speech,
        )
        log.info("  %s", describe_talk_set(talk_path.stem, talks))
        for example in stats.examples:
            log.info("  %s", example)
        result[split] = {"segments": seg_path, "talks": talk_path, "stats": stats.__dict__}
    return result


def download_tedlium(
    root: str | os.PathLike,
    mirror: str = "openslr",
    *,
    data_dir: str | os.PathLike | None = None,
    verify: bool = True,
    checksums: str | os.PathLike | None = None,
    **download_kwargs,
) -> Path:
    """Fetch ``TEDLIUM_release-3.tgz`` (about 50 GB) into ``root``; resumable and verified.

    ``data_dir``: a folder already holding the archive (linked instead of downloaded).
    ``checksums``: an md5sum/sha256sum list (path or URL) whose digest replaces the built-in one.
    """
    archive = Archive(TEDLIUM_ARCHIVE, md5=TEDLIUM_MD5, sha256=TEDLIUM_SHA256)
    (path,) = fetch_archives(TEDLIUM_MIRRORS.get(mirror, mirror), [archive], root, data_dir=data_dir, verify=verify,
                             checksums=checksums, **download_kwargs)
    return path


def extract_tedlium(root: str | os.PathLike) -> Path:
    """Extract the archive into ``root`` (idempotent); return ``<root>/TEDLIUM_release-3``."""
    root = Path(root)
    archive = root / TEDLIUM_ARCHIVE
    if not archive.exists() and not (root / f".{archive.name}.extracted").exists():
        raise MissingFileError(f"{archive}: archive not found; run stage 0 (download) first or pass --data_dir")
    extract(archive, root)
    return root / TEDLIUM_DIRNAME


def tedlium_manifests(
    manifest_dir: str | os.PathLike,
    train: str | Sequence[str] = ("train",),
    dev: str | Sequence[str] = ("dev",),
    test: str | Sequence[str] | dict = ("dev", "test", "dev_talks", "test_talks"),
) -> dict:
    """Manifest paths for the Hydra data config (``corpus._target_``).

    Returns ``{"train": [paths], "dev": [paths], "test": {name: path}}``; raises FileNotFoundError
    naming the missing manifest and the recipe stage that writes it, and TedliumError naming an
    empty one (an interrupted or older preparation: an empty set cannot be trained or scored).
    """
    paths = prepared_manifests(
        manifest_dir,
        train,
        dev,
        test,
        hint="run recipes/tedlium3/run.sh --stage 1 --stop_stage 2 first "
        "(stage 0 downloads the archive; stage 3 builds the long-form sets)",
    )
    for path in [*paths["train"], *paths["dev"], *paths["test"].values()]:
        if not _has_entries(Path(path)):
            raise TedliumError(
                f"{path}: manifest is empty; run recipes/tedlium3/run.sh --stage 2 --stop_stage 3 again "
                "(stage 2 prepares empty or outdated manifests again, stage 3 rebuilds empty long-form sets)"
            )
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """CLI used by recipes/tedlium3/run.sh: ``download`` | ``extract`` | ``prepare``."""
    parser, commands = corpus_parser(
        "tedlium", __doc__, mirrors=TEDLIUM_MIRRORS, corpus_dir_help=f"folder holding {TEDLIUM_DIRNAME}/ (or that folder)",
        download_help=f"fetch {TEDLIUM_ARCHIVE} (resume + checksum)", extract_help="extract the archive (idempotent)",
        prepare_help="write <out_dir>/<split>.jsonl and <split>_talks.jsonl",
    )
    commands["prepare"].add_argument("--subset", default="legacy", choices=TEDLIUM_SUBSETS)
    commands["prepare"].add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    return run_corpus_cli(
        parser, argv,
        download=lambda a: download_tedlium(a.root, a.mirror, **download_options(a)),
        extract=lambda a: extract_tedlium(a.root),
        prepare=lambda a: prepare_tedlium(a.corpus_dir, a.out_dir, subset=a.subset, splits=a.splits,
                                          overwrite=a.overwrite),
    )


if __name__ == "__main__":
    sys.exit(main())
