"""What the corpus modules (``python -m asr_pe.data.<corpus>``) share: archive download and the CLI.

Every corpus module (``librispeech.py``, ``tedlium.py``) has ``download`` | ``extract`` |
``prepare`` subcommands that its recipe (``recipes/<corpus>/run.sh``) calls. This module holds
the parts that do not depend on the corpus:

- ``fetch_archives``: download published archives (HTTP resume, retries), verified against their
  built-in digests or a checksum list (``--checksums``), or link pre-downloaded copies
  (``--data-dir``);
- ``corpus_parser``: the argument parser with the three subcommands and their common options
  (``download --root --mirror --data-dir --no-verify --checksums``, ``extract --root``,
  ``prepare --corpus-dir --out-dir --overwrite``); the corpus adds its own (``--parts``,
  ``--subset``, …) to the subcommand parsers it gets back;
- ``run_corpus_cli``: parse, log to stderr, run the subcommand's handler and report an error
  as one line (``error: <file>: <what>``, exit status 2) instead of a stack trace.

A new corpus's ``main`` is then a few lines (``librispeech.main`` is the model). No Lightning or
Hydra import here: the recipes' data stages run without them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .download import ChecksumListError, download, link_or_copy, read_checksum_list

__all__ = ["Archive", "corpus_parser", "download_options", "fetch_archives", "run_corpus_cli"]

log = logging.getLogger(__name__)

# What the CLI reports as one line: bad layout/format (ValueError subclasses), missing or
# unreadable files (OSError), failed downloads and extractions (RuntimeError subclasses).
CLI_ERRORS = (OSError, ValueError, RuntimeError)


@dataclass(frozen=True)
class Archive:
    """One published archive: file name and its published digests (None = not verified)."""

    filename: str
    md5: str | None
    sha256: str | None


def fetch_archives(
    base_url: str,
    archives: Iterable[Archive],
    root: str | os.PathLike,
    *,
    data_dir: str | os.PathLike | None = None,
    verify: bool = True,
    checksums: str | os.PathLike | None = None,
    **download_kwargs,
) -> list[Path]:
    """Fetch ``<base_url>/<filename>`` of each archive into ``root``; return the local paths.

    Resumable and verified (``download.download``): against the archive's built-in md5/sha256,
    or, with ``checksums`` (an ``md5sum``/``sha256sum`` list, path or URL, read once), against
    the digests listed there, which must name every archive; ``verify=False`` skips both.
    ``data_dir``: a folder holding some archives under their official names (downloaded
    elsewhere); those are linked into ``root`` and verified instead of downloaded.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    listed = read_checksum_list(checksums, root) if checksums is not None and verify else None
    base_url = base_url.rstrip("/")
    paths = []
    for arch in archives:
        dest = root / arch.filename
        if listed is not None:
            if arch.filename not in listed:
                raise ChecksumListError(f"{checksums}: no checksum for {arch.filename}")
            sums = listed[arch.filename]
        else:
            sums = {"md5": arch.md5, "sha256": arch.sha256} if verify else {}
        if data_dir is not None and (Path(data_dir) / arch.filename).is_file():
            link_or_copy(Path(data_dir) / arch.filename, dest)
            log.info("using pre-downloaded %s", Path(data_dir) / arch.filename)
        paths.append(download(f"{base_url}/{arch.filename}", dest, **sums, **download_kwargs))
    return paths


def corpus_parser(
    corpus: str,
    description: str,
    *,
    mirrors: Mapping[str, str],
    corpus_dir_help: str,
    download_help: str = "fetch archives (resume + checksum)",
    extract_help: str = "extract archives (idempotent)",
    prepare_help: str = "write <out_dir>/<split>.jsonl manifests",
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser of ``python -m asr_pe.data.<corpus>`` and its ``download``/``extract``/``prepare``
    subcommand parsers, which hold the common options; the caller adds the corpus's own.

    ``description``: the module docstring (its first line is used). ``mirrors``: the names
    ``--mirror`` accepts besides a base URL (the default is ``openslr``).
    """
    parser = argparse.ArgumentParser(prog=f"python -m asr_pe.data.{corpus}", description=description.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help=download_help)
    d.add_argument("--root", required=True, help="folder for the archives")
    d.add_argument("--mirror", default="openslr", help=f"{list(mirrors)} or a base URL")
    d.add_argument("--data-dir", default=None, help="folder with pre-downloaded archives")
    d.add_argument("--no-verify", action="store_true", help="skip checksum verification")
    d.add_argument("--checksums", default=None,
                   help="md5sum/sha256sum list (path or URL) replacing the built-in digests, e.g. a mirror's md5sum.txt")
    e = sub.add_parser("extract", help=extract_help)
    e.add_argument("--root", required=True)
    p = sub.add_parser("prepare", help=prepare_help)
    p.add_argument("--corpus-dir", required=True, help=corpus_dir_help)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--overwrite", action="store_true", help="prepare again even where the manifests exist")
    return parser, {"download": d, "extract": e, "prepare": p}


def download_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of ``fetch_archives`` given by the common ``download`` options."""
    return {"data_dir": args.data_dir, "verify": not args.no_verify, "checksums": args.checksums}


def run_corpus_cli(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    **handlers: Callable[[argparse.Namespace], object],
) -> int:
    """Parse ``argv`` and run ``handlers[<subcommand>](args)``; return the exit status.

    Logs at INFO to stderr. An error of the data (a malformed line, a missing file, a failed
    download or checksum) prints one line ``error: <message>`` (the messages name the file) and
    returns 2, as a usage error does through argparse.
    """
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        handlers[args.command](args)
    except CLI_ERRORS as err:  # one clear line, not a stack trace
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
