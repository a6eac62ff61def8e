"""Resumable, verified downloads and safe, idempotent archive extraction for corpus recipes.

Public corpora are tens of gigabytes served by volunteer mirrors, so a download must survive a
dropped connection (HTTP Range resume of ``<dest>.part``), must prove it received the published
bytes (md5/sha256) and must never leave a half-written file under the final name (atomic rename).
Only the standard library is used (urllib, hashlib, tarfile), so it works on clusters without
extra packages and for ``file://`` mirrors (a pre-downloaded copy on a shared file system).
"""

from __future__ import annotations

import hashlib
import http.client
import inspect
import json
import logging
import os
import re
import shutil
import socket
import stat
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from asr_pe.errors import FolderTakenError, MissingFileError, UserError

__all__ = [
    "DownloadError",
    "ChecksumError",
    "ExtractError",
    "download",
    "extract",
    "file_digest",
    "file_digests",
    "verify_checksum",
]

log = logging.getLogger(__name__)

# 4xx statuses worth retrying (timeout, rate limit); every other 4xx is final.
_RETRYABLE_4XX = {408, 429}
_LOG_EVERY_BYTES = 256 << 20


class DownloadError(UserError, RuntimeError):
    """The file could not be fetched (offline, unreachable host, HTTP error, truncated body)."""


class ChecksumError(DownloadError):
    """The bytes on disk do not match the published checksum; the bad file was moved aside."""

    def __init__(self, path: Path, algorithm: str, expected: str, actual: str, moved_to: Path | None):
        self.path, self.algorithm = Path(path), algorithm
        self.expected, self.actual, self.moved_to = expected, actual, moved_to
        where = f"; the bad file was moved to {moved_to}" if moved_to else ""
        super().__init__(
            f"{path}: {algorithm} checksum mismatch: expected {expected}, got {actual}{where}. "
            "Delete it and download again, or check that the mirror serves the official archive."
        )


class ChecksumListError(UserError, ValueError):
    """A checksum list (md5sum / sha256sum format) that cannot be read or lacks a file."""


class ExtractError(UserError, RuntimeError):
    """An archive is unreadable or holds a member that would escape the destination folder."""


def file_digests(path: str | os.PathLike, algorithms: Iterable[str], *, chunk: int = 1 << 20) -> dict[str, str]:
    """Hex digests of a file in one pass (archives are tens of GB: read them once, in chunks)."""
    hashes = {a: hashlib.new(a) for a in algorithms}
    with open(path, "rb") as f:
        while block := f.read(chunk):
            for h in hashes.values():
                h.update(block)
    return {a: h.hexdigest() for a, h in hashes.items()}


def file_digest(path: str | os.PathLike, algorithm: str, *, chunk: int = 1 << 20) -> str:
    """Hex digest of a file, read in chunks."""
    return file_digests(path, [algorithm], chunk=chunk)[algorithm]


def verify_checksum(
    path: str | os.PathLike,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    move_aside: bool = True,
    report_as: str | os.PathLike | None = None,
) -> None:
    """Raise ChecksumError when ``path`` does not match a given digest (None = not checked).

    With ``move_aside`` the bad file is renamed to ``<path>.bad`` so that a re-run downloads a
    fresh copy while the evidence stays on disk; nothing is deleted.
    """
    path = Path(path)
    wanted = {a: e for a, e in (("sha256", sha256), ("md5", md5)) if e}
    if not wanted:
        return
    log.info("verifying %s of %s", "+".join(wanted), report_as or path)
    actuals = file_digests(path, wanted)
    for algorithm, expected in wanted.items():
        actual = actuals[algorithm]
        if actual.lower() != expected.lower():
            moved_to = None
            if move_aside:
                moved_to = path.with_name(Path(report_as or path).name + ".bad")
                os.replace(path, moved_to)
            raise ChecksumError(Path(report_as or path), algorithm, expected.lower(), actual, moved_to)


def read_checksum_list(source: str | os.PathLike, workdir: str | os.PathLike) -> dict[str, dict[str, str]]:
    """``{filename: {"md5" | "sha256": hex}}`` from ``md5sum``/``sha256sum`` output (a path or URL).

    Lines are ``<hex digest>  <file name>`` (a ``*`` before the name marks binary mode); the
    digest length tells the algorithm (32: md5, 64: sha256). A URL is fetched into ``workdir``.
    """
    text_path = Path(source)
    if "://" in str(source):
        text_path = Path(workdir) / ("." + Path(str(source).split("?")[0]).name + ".checksums")
        text_path.unlink(missing_ok=True)  # always the mirror's current list
        download(str(source), text_path)
    out: dict[str, dict[str, str]] = {}
    with open(text_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            m = re.fullmatch(r"([0-9a-fA-F]{32}|[0-9a-fA-F]{64}) [ *](\S.*)", line.rstrip("\n"))
            if m is None:
                raise ChecksumListError(f"{source}:{n}: not a '<md5 or sha256>  <file>' line: {line.strip()[:80]!r}")
            algorithm = "md5" if len(m.group(1)) == 32 else "sha256"
            out.setdefault(Path(m.group(2).strip()).name, {})[algorithm] = m.group(1).lower()
    return out


def _offline_hint(url: str, dest: Path, part: Path) -> str:
    hint = (f"If this machine has no internet access, download {url} elsewhere and either place it at "
            f"{dest} or pass the folder that holds it to the recipe (run.sh --data_dir DIR)")
    # only a partial download that exists is worth naming (a 404 leaves none behind)
    if part.is_file() and part.stat().st_size > 0:
        hint += f"; the partial download {part} ({part.stat().st_size} bytes) is resumed on the next attempt"
    return hint + "."


def _content_range_total(value: str | None) -> int | None:
    """Total size from a ``Content-Range: bytes a-b/total`` (or ``bytes */total``) header."""
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


class _Progress:
    """A log line every ``every`` bytes: long jobs must show they are alive, in any log file."""

    def __init__(self, name: str, start: int, total: int | None, every: int):
        self.name, self.total, self.every = name, total, every
        self.done = start
        self.next_report = start + every
        self.t0, self.start = time.monotonic(), start

    def update(self, n: int) -> None:
        self.done += n
        if self.done >= self.next_report:
            self.next_report = self.done + self.every
            self.report()

    def report(self) -> None:
        rate = (self.done - self.start) / max(time.monotonic() - self.t0, 1e-6) / (1 << 20)
        of = f" of {self.total / (1 << 20):.0f} MiB" if self.total else ""
        log.info("%s: %.0f MiB%s (%.1f MiB/s)", self.name, self.done / (1 << 20), of, rate)


def _copy_stream(src, out, progress: _Progress, chunk: int) -> None:
    while block := src.read(chunk):
        out.write(block)
        progress.update(len(block))


def _fetch_file_url(url: str, part: Path, chunk: int, log_every: int) -> None:
    """``file://`` mirror: resume by seeking (urllib's file handler ignores Range)."""
    src = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    try:
        total = src.stat().st_size
    except OSError as e:
        raise MissingFileError(f"{src}: {e.strerror}") from e
    offset = part.stat().st_size if part.exists() else 0
    if offset > total:  # not a prefix of this file: start over
        offset = 0
    progress = _Progress(part.name, offset, total, log_every)
    with open(src, "rb") as f, open(part, "ab" if offset else "wb") as out:
        f.seek(offset)
        _copy_stream(f, out, progress, chunk)


def _fetch_http(url: str, part: Path, chunk: int, timeout: float, log_every: int) -> None:
    """One HTTP(S) attempt that appends to ``part`` from its current size.

    206 with a matching Content-Range -> append; 200 -> the server ignored Range, restart from 0;
    416 with a total equal to what we hold -> the part file is already complete.
    Raises DownloadError on a truncated body so the caller retries (and resumes).
    """
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "asr_pe-download/1"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            total = _content_range_total(e.headers.get("Content-Range"))
            e.close()
            if total == offset:
                return  # already complete
            part.unlink()  # what we hold is not a prefix of this resource
            raise DownloadError(f"{url}: server rejected resume at byte {offset}; restarting") from e
        raise
    with response:
        status = response.status
        total = None
        if status == 206:
            content_range = response.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {offset}-"):
                raise DownloadError(f"{url}: unexpected Content-Range {content_range!r} for resume at {offset}")
            total = _content_range_total(content_range)
            mode = "ab"
        else:
            if offset:
                log.info("%s: server ignored the Range request; restarting from byte 0", url)
            offset, mode = 0, "wb"
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        if offset == 0:
            log.info("downloading %s -> %s%s", url, part, f" ({total / (1 << 20):.1f} MiB)" if total else "")
        else:
            log.info("resuming %s at byte %d -> %s", url, offset, part)
        progress = _Progress(part.name, offset, total, log_every)
        with open(part, mode) as out:
            _copy_stream(response, out, progress, chunk)
    size = part.stat().st_size
    if total is not None and size != total:
        raise DownloadError(f"{url}: connection closed at byte {size} of {total}")


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    chunk: int = 1 << 20,
    retries: int = 3,
    timeout: float = 60,
    backoff: float = 2.0,
    log_every_bytes: int = _LOG_EVERY_BYTES,
) -> Path:
    """Fetch ``url`` to ``dest`` with resume, retries, checksum verification and atomic rename.

    - An existing ``dest`` is kept (and verified when a checksum is given): re-running is free.
    - Bytes go to ``dest + ".part"``; an interrupted run resumes it with an HTTP Range request
      (or restarts when the server ignores Range).
    - ``sha256``/``md5``: published digests; None skips that check. A mismatch raises
      ChecksumError naming file, expected and actual digest, and moves the file to ``<dest>.bad``.
    - Transient failures (refused/reset connections, timeouts, 5xx, truncated bodies): up to
      ``retries`` attempts in all, with exponential backoff (each resumes the ``.part`` file);
      then DownloadError explains how to use a pre-downloaded copy instead.
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    if dest.exists():
        verify_checksum(dest, sha256=sha256, md5=md5)
        log.info("%s exists%s; not downloading", dest, " and matches its checksum" if sha256 or md5 else "")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in ("http", "https", "file"):
        raise DownloadError(f"{url}: unsupported URL scheme {scheme!r} (use http, https or file)")

    attempts = max(1, retries)
    last_error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            if scheme == "file":
                _fetch_file_url(url, part, chunk, log_every_bytes)
            else:
                _fetch_http(url, part, chunk, timeout, log_every_bytes)
            break
        except FileNotFoundError as e:
            raise DownloadError(f"{url}: no such file ({e}). " + _offline_hint(url, dest, part)) from e
        except urllib.error.HTTPError as e:
            last_error = e
            if 400 <= e.code < 500 and e.code not in _RETRYABLE_4XX:
                raise DownloadError(f"{url}: HTTP {e.code} {e.reason}. " + _offline_hint(url, dest, part)) from e
        except (urllib.error.URLError, OSError, http.client.HTTPException, socket.timeout, DownloadError) as e:
            last_error = e
        if attempt < attempts:
            wait = backoff * 2 ** (attempt - 1)
            log.warning("%s: attempt %d/%d failed (%s); retrying in %.1f s", url, attempt, attempts, last_error, wait)
            time.sleep(wait)
    else:
        reason = getattr(last_error, "reason", None) or last_error
        raise DownloadError(
            f"could not download {url} after {attempts} attempt(s): {reason}. " + _offline_hint(url, dest, part)
        ) from last_error

    verify_checksum(part, sha256=sha256, md5=md5, report_as=dest)
    os.replace(part, dest)
    log.info("%s: done (%.1f MiB)", dest, dest.stat().st_size / (1 << 20))
    return dest


# --------------------------------------------------------------------------------------- extract


def _marker_path(archive: Path, dest_dir: Path) -> Path:
    return dest_dir / f".{archive.name}.extracted"


def _archive_signature(archive: Path) -> dict:
    st = archive.stat()
    return {"archive": archive.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _check_member(archive: Path, dest_root: Path, member: tarfile.TarInfo) -> None:
    """Reject members that would write outside ``dest_root`` (absolute, ``..``, escaping links)."""

    def inside(p: Path) -> bool:
        return p == dest_root or dest_root in p.parents

    name = member.name
    if os.path.isabs(name) or name.startswith(("/", "\\")):
        raise ExtractError(f"{archive}: member {name!r} has an absolute path; refusing to extract")
    target = Path(os.path.normpath(dest_root / name))
    if ".." in Path(name).parts or not inside(target):
        raise ExtractError(f"{archive}: member {name!r} would be written outside {dest_root}; refusing to extract")
    if member.issym() or member.islnk():
        base = target.parent if member.issym() else dest_root
        link = Path(os.path.normpath(base / member.linkname))
        if os.path.isabs(member.linkname) or not inside(link):
            raise ExtractError(
                f"{archive}: link {name!r} -> {member.linkname!r} points outside {dest_root}; refusing to extract"
            )
    if member.ischr() or member.isblk() or member.isfifo():
        raise ExtractError(f"{archive}: member {name!r} is a device or fifo; refusing to extract")


def extraction_filter_supported() -> bool:
    """Whether this Python's tarfile has extraction filters (``extract(..., filter="data")``).

    They came in 3.12 and were backported to 3.8.17, 3.9.17, 3.10.12 and 3.11.4; older patch
    releases of the Python versions we support (>= 3.10) lack them.
    """
    try:
        parameters = inspect.signature(tarfile.TarFile.extract).parameters
    except (TypeError, ValueError):  # no introspectable signature: do not guess
        return False
    return hasattr(tarfile, "data_filter") and "filter" in parameters


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, path]) == root


def _check_member_on_disk(archive: Path, dest_root: Path, member: tarfile.TarInfo) -> None:
    """What the "data" filter checks, for Pythons without it; call right before extracting.

    ``_check_member`` works on names only; this one resolves the links already on disk (a link
    extracted earlier can make a later, harmless-looking name point elsewhere) and refuses the
    special bits the filter would have dropped.
    """
    root = os.path.realpath(dest_root)
    target = os.path.realpath(os.path.join(root, member.name))
    if not _inside(root, target):
        raise ExtractError(
            f"{archive}: member {member.name!r} resolves to {target}, outside {dest_root}; refusing to extract"
        )
    if member.issym() or member.islnk():
        base = os.path.join(root, os.path.dirname(member.name)) if member.issym() else root
        link = os.path.realpath(os.path.join(base, member.linkname))
        if not _inside(root, link):
            raise ExtractError(
                f"{archive}: link {member.name!r} -> {member.linkname!r} resolves to {link}, outside {dest_root}; "
                "refusing to extract"
            )
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise ExtractError(
            f"{archive}: member {member.name!r} is a device, fifo or other special file; refusing to extract"
        )
    if member.mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        raise ExtractError(
            f"{archive}: member {member.name!r} has mode {member.mode:o} (setuid/setgid/sticky bit); "
            "refusing to extract"
        )


def _extract_member(
    tar: tarfile.TarFile, archive: Path, dest_root: Path, member: tarfile.TarInfo, filtered: bool
) -> None:
    if filtered:
        # "data" filter: a second, standard line of defence (no setuid bits, no devices).
        tar.extract(member, dest_root, filter="data")
        return
    _check_member_on_disk(archive, dest_root, member)
    # set_attrs=False: no owner, group or mode from the archive is applied (files get the usual
    # 0666/0777 minus the umask), as the "data" filter does for ownership.
    tar.extract(member, dest_root, set_attrs=False)


def extract(archive: str | os.PathLike, dest_dir: str | os.PathLike) -> Path:
    """Extract a .tar.gz / .tgz / .tar into ``dest_dir`` once; return ``dest_dir``.

    A marker ``dest_dir/.<archive name>.extracted`` (with the archive's size and mtime) is written
    after the last member, so a re-run skips the work (also once the archive has been deleted to
    save space) and an interrupted run extracts again.
    Every member is checked before anything is written: absolute paths, ``..`` components and
    links that leave ``dest_dir`` raise ExtractError naming the member. Extraction then uses
    tarfile's "data" filter, or, on a Python without filters, the same checks by hand (links
    resolved on disk, no special files, no setuid/setgid/sticky bits, no archive ownership).
    """
    archive, dest_dir = Path(archive), Path(dest_dir)
    marker = _marker_path(archive, dest_dir)
    if not archive.is_file():
        if marker.exists():  # extracted earlier, archive deleted since to save space
            log.info("%s was extracted into %s and has been deleted since; skipping", archive, dest_dir)
            return dest_dir
        raise ExtractError(f"{archive}: archive not found")
    dest_dir.mkdir(parents=True, exist_ok=True)
    signature = _archive_signature(archive)
    if marker.exists():
        try:
            if json.loads(marker.read_text()) == signature:
                log.info("%s already extracted into %s (marker %s); skipping", archive, dest_dir, marker.name)
                return dest_dir
        except (OSError, ValueError):
            pass
        log.info("%s changed since it was extracted; extracting again", archive)
    dest_root = dest_dir.resolve()
    filtered = extraction_filter_supported()
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(archive, dest_root, member)
            if not filtered:
                log.warning(
                    "this Python's tarfile has no extraction filters (added in 3.10.12 / 3.11.4 / 3.12): "
                    "extracting %s with asr_pe's own checks (paths, links, devices, setuid bits)", archive.name
                )
            log.info("extracting %s (%d members) into %s", archive, len(members), dest_dir)
            for i, member in enumerate(members, 1):
                _extract_member(tar, archive, dest_root, member, filtered)
                if i % 50000 == 0:
                    log.info("%s: %d/%d members", archive.name, i, len(members))
    except (tarfile.TarError, EOFError, OSError) as e:
        if isinstance(e, getattr(tarfile, "FilterError", ())):
            raise ExtractError(f"{archive}: unsafe member rejected: {e}") from e
        raise ExtractError(f"{archive}: cannot extract ({e}); the archive may be truncated or corrupt") from e
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(json.dumps(signature))
    os.replace(tmp, marker)
    return dest_dir


def link_or_copy(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Make a pre-downloaded archive available at ``dest`` (symlink, else copy), without touching src."""
    src, dest = Path(src), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() or dest.is_symlink():
        if dest.resolve() == src.resolve():
            return dest
        raise FolderTakenError(f"{dest} exists and is not {src}; remove it first")
    try:
        dest.symlink_to(src.resolve())
    except OSError:
        shutil.copy2(src, dest)
    return dest
