"""LibriSpeech (OpenSLR resource 12): download, extract and manifests in the official layout.

On-disk layout of an extracted part (what ``prepare_librispeech`` reads)::

    <root>/LibriSpeech/<part>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt
    <root>/LibriSpeech/<part>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac

Every ``.trans.txt`` line is ``<speaker>-<chapter>-<utt> <TRANSCRIPT>``.

Text normalisation: LibriSpeech transcripts are upper case A-Z with apostrophes (``DON'T``) and
single spaces, already free of punctuation and digits. They are lower-cased and runs of white
space collapsed; nothing else changes (apostrophes stay), so WER is comparable with published
LibriSpeech results after lower-casing.

Grouping: ``speaker`` in the manifest is ``<speaker>-<chapter>``. A chapter is one continuous
reading of one book by one reader, the unit from which long-form test sets are concatenated
(consecutive utterances of one chapter are consecutive audio). Utterances are written in
(speaker, chapter, utterance) numeric order, i.e. chapter order.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from asr_pe.errors import MissingFileError, UserError
from .corpus_cli import Archive, corpus_parser, download_options, fetch_archives, run_corpus_cli
from .corpus_manifests import audio_seconds, prepared_manifests
from .download import extract
from .manifest import Utterance, write_manifest

__all__ = [
    "LIBRISPEECH_ARCHIVES",
    "LIBRISPEECH_MIRRORS",
    "LIBRISPEECH_PARTS",
    "LibriSpeechError",
    "download_librispeech",
    "extract_librispeech",
    "librispeech_manifests",
    "normalize_librispeech_text",
    "prepare_librispeech",
]

log = logging.getLogger(__name__)


# Checksums, not invented:
# - md5: the values of OpenSLR's https://www.openslr.org/resources/12/md5sum.txt, as reproduced
#   verbatim in several independent public download scripts;
# - sha256: the values torchaudio ships in torchaudio/datasets/librispeech.py (_CHECKSUMS).
# Both are verified when present; set a value to None to skip that check.
LIBRISPEECH_ARCHIVES: dict[str, Archive] = {
    "train-clean-100": Archive(
        "train-clean-100.tar.gz",
        md5="2a93770f6d5c6c964bc36631d331a522",
        sha256="d4ddd1d5a6ab303066f14971d768ee43278a5f2a0aa43dc716b0e64ecbbbf6e2",
    ),
    "train-clean-360": Archive(
        "train-clean-360.tar.gz",
        md5="c0e676e450a7ff2f54aeade5171606fa",
        sha256="146a56496217e96c14334a160df97fffedd6e0a04e66b9c5af0d40be3c792ecf",
    ),
    "train-other-500": Archive(
        "train-other-500.tar.gz",
        md5="d1a0fd59409feb2c614ce4d30c387708",
        sha256="ddb22f27f96ec163645d53215559df6aa36515f26e01dd70798188350adcb6d2",
    ),
    "dev-clean": Archive(
        "dev-clean.tar.gz",
        md5="42e2234ba48799c1f50f24a7926300a1",
        sha256="76f87d090650617fca0cac8f88b9416e0ebf80350acb97b343a85fa903728ab3",
    ),
    "dev-other": Archive(
        "dev-other.tar.gz",
        md5="c8d0bcc9cca99d4f8b62fcc847357931",
        sha256="12661c48e8c3fe1de2c1caa4c3e135193bfb1811584f11f569dd12645aa84365",
    ),
    "test-clean": Archive(
        "test-clean.tar.gz",
        md5="32fa31d27d2e1cad72775fee3f4849a9",
        sha256="39fde525e59672dc6d1551919b1478f724438a95aa55f874b576be21967e6c23",
    ),
    "test-other": Archive(
        "test-other.tar.gz",
        md5="fb5a50374b501bb3bac4815ee91d3135",
        sha256="d09c181bba5cf717b3dee7d4d592af11a3ee3a09e08ae025c5506f6ebe961c29",
    ),
}
LIBRISPEECH_PARTS: tuple[str, ...] = tuple(LIBRISPEECH_ARCHIVES)

# Base URLs of resource 12; a ``mirror`` argument is one of these names or any base URL
# (http, https or file://) that holds the archives under their official names.
LIBRISPEECH_MIRRORS: dict[str, str] = {
    "openslr": "https://www.openslr.org/resources/12",
    "us": "https://us.openslr.org/resources/12",
    "eu": "https://openslr.elda.org/resources/12",
    "cn": "https://openslr.magicdatatech.com/resources/12",
}

_TRANS_LINE = re.compile(r"^(\d+)-(\d+)-(\d+)\s+(\S.*)$")
_NUMERIC = re.compile(r"^\d+$")


class LibriSpeechError(UserError, ValueError):
    """The corpus tree is not in the official layout; names the file (and line)."""


def _check_parts(parts: Iterable[str]) -> list[str]:
    parts = [parts] if isinstance(parts, str) else list(parts)
    unknown = [p for p in parts if p not in LIBRISPEECH_ARCHIVES]
    if unknown:
        raise ValueError(f"unknown LibriSpeech part(s) {unknown}; choose from {list(LIBRISPEECH_PARTS)}")
    return parts


def _base_url(mirror: str) -> str:
    return LIBRISPEECH_MIRRORS.get(mirror, mirror).rstrip("/")


def download_librispeech(
    root: str | os.PathLike,
    parts: Iterable[str],
    mirror: str = "openslr",
    *,
    data_dir: str | os.PathLike | None = None,
    verify: bool = True,
    checksums: str | os.PathLike | None = None,
    **download_kwargs,
) -> list[Path]:
    """Fetch the archives of ``parts`` into ``root`` (resumable, checksum-verified); return their paths.

    ``data_dir``: a folder that already holds some archives under their official names
    (downloaded elsewhere); those are linked into ``root`` and verified instead of downloaded.
    ``checksums``: a checksum list in ``md5sum``/``sha256sum`` format (OpenSLR's ``md5sum.txt``),
    a path or a URL, whose digests replace the built-in ones (a local mirror, test archives).
    """
    archives = [LIBRISPEECH_ARCHIVES[part] for part in _check_parts(parts)]
    return fetch_archives(_base_url(mirror), archives, root, data_dir=data_dir, verify=verify, checksums=checksums,
                          **download_kwargs)


def extract_librispeech(root: str | os.PathLike, parts: Iterable[str]) -> Path:
    """Extract ``<root>/<part>.tar.gz`` into ``root`` (idempotent); return ``<root>/LibriSpeech``."""
    root = Path(root)
    for part in _check_parts(parts):
        archive = root / LIBRISPEECH_ARCHIVES[part].filename
        if not archive.exists() and not (root / f".{archive.name}.extracted").exists():
            raise MissingFileError(
                f"{archive}: archive not found; run stage 0 (download) first or pass --data_dir"
            )
        extract(archive, root)
    return root / "LibriSpeech"


def normalize_librispeech_text(text: str) -> str:
    """Lower-case and collapse white space (see the module docstring)."""
    return " ".join(text.lower().split())


def _corpus_dir(root: Path) -> Path:
    """Accept the folder holding ``LibriSpeech/`` or the ``LibriSpeech`` folder itself."""
    return root / "LibriSpeech" if (root / "LibriSpeech").is_dir() else root


def _sorted_numeric_dirs(folder: Path) -> list[Path]:
    dirs = [d for d in folder.iterdir() if d.is_dir()]
    odd = [d for d in dirs if not _NUMERIC.match(d.name)]
    if odd:
        raise LibriSpeechError(f"{odd[0]}: not a numeric speaker/chapter folder (official layout expected)")
    return sorted(dirs, key=lambda d: int(d.name))


def _read_chapter(chapter_dir: Path, speaker: str, chapter: str) -> list[tuple[str, str, Path]]:
    """(utterance id, normalised text, flac path) of one chapter, in utterance order."""
    trans = chapter_dir / f"{speaker}-{chapter}.trans.txt"
    if not trans.is_file():
        raise LibriSpeechError(f"{trans}: transcript file missing")
    rows: dict[int, tuple[str, str, Path]] = {}
    with open(trans, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            m = _TRANS_LINE.match(line.rstrip("\r\n"))
            if not m:
                raise LibriSpeechError(
                    f"{trans}:{line_no}: expected '<speaker>-<chapter>-<utt> TRANSCRIPT', got {line.strip()[:80]!r}"
                )
            spk, chap, utt, text = m.groups()
            if (spk, chap) != (speaker, chapter):
                raise LibriSpeechError(
                    f"{trans}:{line_no}: utterance {spk}-{chap}-{utt} does not belong to chapter {speaker}-{chapter}"
                )
            uid = f"{spk}-{chap}-{utt}"
            if int(utt) in rows:
                raise LibriSpeechError(f"{trans}:{line_no}: duplicate utterance {uid}")
            flac = chapter_dir / f"{uid}.flac"
            if not flac.is_file():
                raise LibriSpeechError(f"{trans}:{line_no}: audio file missing: {flac}")
            rows[int(utt)] = (uid, normalize_librispeech_text(text), flac)
    described = {p for _, _, p in rows.values()}
    orphans = sorted(p.name for p in chapter_dir.glob("*.flac") if p not in described)
    if orphans:
        log.warning("%s: %d flac file(s) without a transcript line are ignored: %s", trans, len(orphans), orphans[:3])
    return [rows[k] for k in sorted(rows)]


def _prepare_part(part_dir: Path, num_workers: int) -> list[Utterance]:
    entries: list[tuple[str, str, Path, str]] = []  # (id, text, flac, speaker-chapter)
    for speaker_dir in _sorted_numeric_dirs(part_dir):
        for chapter_dir in _sorted_numeric_dirs(speaker_dir):
            group = f"{speaker_dir.name}-{chapter_dir.name}"
            for uid, text, flac in _read_chapter(chapter_dir, speaker_dir.name, chapter_dir.name):
                entries.append((uid, text, flac, group))
    if not entries:
        raise LibriSpeechError(f"{part_dir}: no utterances found (is this an extracted LibriSpeech part?)")

    def duration(flac: Path) -> float:
        return audio_seconds(flac, LibriSpeechError)

    # soundfile releases the GIL while reading headers: threads help on network file systems.
    with ThreadPoolExecutor(max_workers=max(1, num_workers)) as pool:
        durations = list(pool.map(duration, (e[2] for e in entries)))
    return [
        Utterance(id=uid, audio_filepath=str(flac.resolve()), duration=round(d, 6), text=text, speaker=group)
        for (uid, text, flac, group), d in zip(entries, durations)
    ]


def prepare_librispeech(
    root: str | os.PathLike,
    out_dir: str | os.PathLike,
    parts: Iterable[str],
    *,
    overwrite: bool = False,
    num_workers: int = 4,
) -> dict[str, Path]:
    """Write ``<out_dir>/<part>.jsonl`` for each part from the official layout; return {part: path}.

    ``root`` is the folder that holds ``LibriSpeech/`` (or that folder itself). An existing
    manifest is kept unless ``overwrite`` (so a killed run resumes part by part).
    Raises LibriSpeechError naming the file and line for a transcript line that does not parse
    or a missing flac, and naming the file for an unreadable or empty flac.
    """
    corpus = _corpus_dir(Path(root))
    out_dir = Path(out_dir)
    written: dict[str, Path] = {}
    for part in _check_parts(parts):
        manifest = out_dir / f"{part}.jsonl"
        if manifest.exists() and not overwrite:
            log.info("%s exists; skipping %s", manifest, part)
            written[part] = manifest
            continue
        part_dir = corpus / part
        if not part_dir.is_dir():
            raise LibriSpeechError(f"{part_dir}: part folder missing (extract {part}.tar.gz first)")
        utterances = _prepare_part(part_dir, num_workers)
        write_manifest(manifest, utterances)
        hours = sum(u.duration for u in utterances) / 3600
        chapters = len({u.speaker for u in utterances})
        log.info("%s: %d utterances, %d chapters, %.2f h -> %s", part, len(utterances), chapters, hours, manifest)
        written[part] = manifest
    return written


def librispeech_manifests(
    manifest_dir: str | os.PathLike,
    train: str | Sequence[str] = ("train-clean-100", "train-clean-360", "train-other-500"),
    dev: str | Sequence[str] = ("dev-clean", "dev-other"),
    test: str | Sequence[str] | dict = ("test-clean", "test-other"),
) -> dict:
    """Manifest paths for the Hydra data config (``corpus._target_``).

    Returns ``{"train": [paths], "dev": [paths], "test": {name: path}}``; raises FileNotFoundError
    naming the missing manifest and the recipe stage that writes it.
    """
    return prepared_manifests(
        manifest_dir,
        train,
        dev,
        test,
        hint="run recipes/librispeech/run.sh --stage 1 --stop_stage 2 first "
        "(stage 0 downloads the archives; stage 3 builds the long-form sets)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """CLI used by recipes/librispeech/run.sh: ``download`` | ``extract`` | ``prepare``."""
    parser, commands = corpus_parser(
        "librispeech", __doc__, mirrors=LIBRISPEECH_MIRRORS, prepare_help="write <out_dir>/<part>.jsonl manifests",
        corpus_dir_help="folder holding LibriSpeech/ (or LibriSpeech itself)",
    )
    for command in commands.values():
        command.add_argument("--parts", nargs="+", required=True, choices=LIBRISPEECH_PARTS)
    commands["prepare"].add_argument("--num-workers", type=int, default=4)
    return run_corpus_cli(
        parser, argv,
        download=lambda a: download_librispeech(a.root, a.parts, a.mirror, **download_options(a)),
        extract=lambda a: extract_librispeech(a.root, a.parts),
        prepare=lambda a: prepare_librispeech(a.corpus_dir, a.out_dir, a.parts, overwrite=a.overwrite,
                                              num_workers=a.num_workers),
    )


if __name__ == "__main__":
    sys.exit(main())
