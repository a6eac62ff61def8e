"""download(): Range resume, restart without Range, retries, checksums, offline; extract(): safe, idempotent."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import tarfile
from pathlib import Path

import pytest

from asr_pe.data.download import ChecksumError, DownloadError, ExtractError, download, extract

PAYLOAD = bytes(range(256)) * 400  # 102400 bytes, position-dependent so misplaced bytes show
SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
MD5 = hashlib.md5(PAYLOAD).hexdigest()


def fast(**kw):
    """Small chunks so resume happens mid-file; no sleeping between retries."""
    return {"chunk": 4096, "timeout": 5, "backoff": 0.0, **kw}


def test_http_resume_sends_range_and_appends(http_server, tmp_path):
    http_server.files["/a.tar.gz"] = PAYLOAD
    dest = tmp_path / "a.tar.gz"
    (tmp_path / "a.tar.gz.part").write_bytes(PAYLOAD[:30000])
    out = download(http_server.url("/a.tar.gz"), dest, sha256=SHA256, md5=MD5, **fast())
    assert out == dest and dest.read_bytes() == PAYLOAD
    assert not (tmp_path / "a.tar.gz.part").exists()  # atomic rename, no leftovers
    assert http_server.requests == [("/a.tar.gz", "bytes=30000-")]


def test_server_ignoring_range_restarts_from_zero(http_server, tmp_path):
    http_server.files["/a"] = PAYLOAD
    http_server.ignore_range = True
    dest = tmp_path / "a"
    # A wrong prefix: appending to it would corrupt the file, restarting must not.
    (tmp_path / "a.part").write_bytes(b"\xff" * 5000)
    download(http_server.url("/a"), dest, sha256=SHA256, **fast())
    assert dest.read_bytes() == PAYLOAD
    assert http_server.requests[0][1] == "bytes=5000-"


def test_dropped_connection_is_retried_and_resumed(http_server, tmp_path):
    http_server.files["/a"] = PAYLOAD
    http_server.truncate_first = 40000
    dest = tmp_path / "a"
    download(http_server.url("/a"), dest, sha256=SHA256, retries=3, **fast())
    assert dest.read_bytes() == PAYLOAD
    assert [r for _, r in http_server.requests] == [None, "bytes=40000-"]


def test_complete_part_file_answered_416_is_accepted(http_server, tmp_path):
    http_server.files["/a"] = PAYLOAD
    dest = tmp_path / "a"
    (tmp_path / "a.part").write_bytes(PAYLOAD)  # killed after the last byte, before the rename
    download(http_server.url("/a"), dest, md5=MD5, **fast())
    assert dest.read_bytes() == PAYLOAD


def test_file_url_download_and_resume(tmp_path):
    src = tmp_path / "mirror" / "x.tgz"
    src.parent.mkdir()
    src.write_bytes(PAYLOAD)
    dest = tmp_path / "out" / "x.tgz"
    dest.parent.mkdir()
    (dest.parent / "x.tgz.part").write_bytes(PAYLOAD[:12345])
    download(src.resolve().as_uri(), dest, sha256=SHA256, **fast())
    assert dest.read_bytes() == PAYLOAD
    # missing file:// source -> DownloadError, not a bare OSError
    with pytest.raises(DownloadError, match="no such file"):
        download((tmp_path / "mirror" / "missing.tgz").as_uri(), tmp_path / "m.tgz", **fast())


def test_bad_checksum_raises_names_file_and_moves_it_aside(http_server, tmp_path):
    http_server.files["/a"] = PAYLOAD
    dest = tmp_path / "a"
    wrong = "0" * 32
    with pytest.raises(ChecksumError) as info:
        download(http_server.url("/a"), dest, md5=wrong, **fast())
    msg = str(info.value)
    assert str(dest) in msg and wrong in msg and MD5 in msg and "md5" in msg
    assert not dest.exists() and not (tmp_path / "a.part").exists()
    bad = tmp_path / "a.bad"
    assert bad.read_bytes() == PAYLOAD  # kept as evidence, nothing deleted
    assert info.value.moved_to == bad


def test_existing_destination_is_verified_not_refetched(tmp_path):
    dest = tmp_path / "a"
    dest.write_bytes(PAYLOAD)
    unreachable = "http://127.0.0.1:9/a"  # would fail if contacted
    assert download(unreachable, dest, sha256=SHA256, **fast()) == dest
    dest.write_bytes(PAYLOAD[:-1] + b"\x00")
    with pytest.raises(ChecksumError, match="sha256"):
        download(unreachable, dest, sha256=SHA256, **fast())
    assert (tmp_path / "a.bad").exists() and not dest.exists()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    return port


def test_unreachable_host_gives_download_error_with_offline_hint(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/train-clean-100.tar.gz"
    dest = tmp_path / "train-clean-100.tar.gz"
    with pytest.raises(DownloadError) as info:
        download(url, dest, retries=2, **fast())
    msg = str(info.value)
    assert "after 2 attempt(s)" in msg and url in msg and "--data_dir" in msg and str(dest) in msg
    assert not isinstance(info.value, ChecksumError)
    assert not dest.exists()


def test_http_404_is_not_retried(http_server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(http_server.url("/nope"), tmp_path / "nope", retries=3, **fast())
    assert len(http_server.requests) == 1


def test_http_404_names_no_partial_download(http_server, tmp_path):
    # the hint once said "a partial download is kept at <dest>.part" where a 404 had left none
    with pytest.raises(DownloadError) as info:
        download(http_server.url("/nope"), tmp_path / "nope.tgz", retries=1, **fast())
    assert not (tmp_path / "nope.tgz.part").exists() and ".part" not in str(info.value)
    (tmp_path / "nope.tgz.part").write_bytes(b"x" * 10)  # an earlier interrupted download: named, with its size
    with pytest.raises(DownloadError, match=r"nope\.tgz\.part \(10 bytes\) is resumed"):
        download(http_server.url("/nope"), tmp_path / "nope.tgz", retries=1, **fast())


# ----------------------------------------------------------------------------------- extract


def _tar_with(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return path


def test_extract_is_idempotent_via_marker(tmp_path):
    archive = _tar_with(tmp_path / "c.tar.gz", {"Corpus/a.txt": b"first", "Corpus/sub/b.txt": b"bee"})
    out = tmp_path / "out"
    assert extract(archive, out) == out
    assert (out / "Corpus/a.txt").read_bytes() == b"first"
    assert (out / "Corpus/sub/b.txt").read_bytes() == b"bee"
    assert (out / ".c.tar.gz.extracted").exists()
    (out / "Corpus/a.txt").write_bytes(b"edited")
    extract(archive, out)  # skipped: the marker matches the archive
    assert (out / "Corpus/a.txt").read_bytes() == b"edited"
    # A different archive under the same name is extracted again.
    _tar_with(archive, {"Corpus/a.txt": b"second version"})
    os.utime(archive, ns=(1, 1))
    extract(archive, out)
    assert (out / "Corpus/a.txt").read_bytes() == b"second version"
    # Deleting the archive after extraction (to save disk) keeps the stage done.
    archive.unlink()
    assert extract(archive, out) == out
    with pytest.raises(ExtractError, match="archive not found"):
        extract(tmp_path / "never.tar.gz", out)


def test_extract_supports_tgz_and_symlinks_inside(tmp_path):
    archive = _tar_with(tmp_path / "t.tgz", {"R/data/x.sph": b"snd"}, links={"R/legacy/x.sph": "../data/x.sph"})
    out = extract(archive, tmp_path / "o")
    assert (out / "R/legacy/x.sph").read_bytes() == b"snd"


@pytest.mark.parametrize(
    "members,links,culprit",
    [
        ({"../evil.txt": b"x"}, None, "../evil.txt"),
        ({"ok/../../evil.txt": b"x"}, None, "ok/../../evil.txt"),
        ({"/abs/evil.txt": b"x"}, None, "/abs/evil.txt"),
        ({"ok.txt": b"x"}, {"link": "../../etc/passwd"}, "link"),
        ({"ok.txt": b"x"}, {"link2": "/etc/passwd"}, "link2"),
    ],
)
def test_extract_rejects_members_escaping_destination(tmp_path, members, links, culprit):
    archive = _tar_with(tmp_path / "evil.tar.gz", members, links)
    out = tmp_path / "deep" / "out"
    with pytest.raises(ExtractError) as info:
        extract(archive, out)
    assert culprit in str(info.value) and str(archive) in str(info.value)
    assert not (tmp_path / "deep" / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert not (out / "ok.txt").exists()  # checked before anything is written
    assert not (out / ".evil.tar.gz.extracted").exists()


def test_extract_corrupt_archive_is_a_clear_error(tmp_path):
    archive = tmp_path / "broken.tar.gz"
    good = _tar_with(tmp_path / "good.tar.gz", {"a.txt": b"a" * 10000})
    archive.write_bytes(good.read_bytes()[:40])
    with pytest.raises(ExtractError, match="broken.tar.gz"):
        extract(archive, tmp_path / "o")


# ------------------------------------------------------- extract without tarfile filters

def _without_extraction_filters(monkeypatch):
    """Make tarfile look like Python 3.10.0-3.10.11 / 3.11.0-3.11.3: no filter= on extract."""
    original = tarfile.TarFile.extract

    def extract(self, member, path="", set_attrs=True, *, numeric_owner=False):
        return original(self, member, path, set_attrs=set_attrs, numeric_owner=numeric_owner)

    monkeypatch.setattr(tarfile.TarFile, "extract", extract)
    monkeypatch.delattr(tarfile, "data_filter", raising=False)


def test_filter_support_is_detected():
    from asr_pe.data.download import extraction_filter_supported

    assert extraction_filter_supported() == hasattr(tarfile, "data_filter")
    assert extraction_filter_supported()  # the venv's Python (3.11.7) has the backport


def test_extract_without_filters_falls_back_to_own_checks(tmp_path, monkeypatch, caplog):
    from asr_pe.data.download import extraction_filter_supported

    _without_extraction_filters(monkeypatch)
    assert not extraction_filter_supported()
    with pytest.raises(TypeError):  # what extract(..., filter="data") did on such a Python
        with tarfile.open(_tar_with(tmp_path / "x.tar.gz", {"a": b"a"})) as tar:
            tar.extract("a", tmp_path / "x", filter="data")
    # The TED-LIUM 3 shape: legacy/train holds relative links into data/.
    archive = _tar_with(tmp_path / "t.tgz", {"R/data/sph/x.sph": b"snd", "R/readme.txt": b"hi"},
                        links={"R/legacy/train/sph/x.sph": "../../../data/sph/x.sph"})
    with caplog.at_level("WARNING", logger="asr_pe.data.download"):
        out = extract(archive, tmp_path / "o")
    assert (out / "R/legacy/train/sph/x.sph").is_symlink()
    assert (out / "R/legacy/train/sph/x.sph").read_bytes() == b"snd"
    assert (out / ".t.tgz.extracted").exists()
    assert "no extraction filters" in caplog.text


def _tar_with_info(path: Path, infos: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in infos:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _member(name: str, *, type=tarfile.REGTYPE, mode=0o644, linkname="") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = type, mode, linkname
    return info


@pytest.mark.parametrize("filters", [True, False], ids=["data-filter", "fallback"])
def test_link_chain_escaping_on_disk_is_refused(tmp_path, monkeypatch, filters):
    """Each name looks harmless (l1 -> ".", l1/l2 -> ".."), but on disk l2 points above the
    destination and a third member would be written there."""
    if not filters:
        _without_extraction_filters(monkeypatch)
    archive = _tar_with_info(tmp_path / "chain.tar.gz", [
        (_member("l1", type=tarfile.SYMTYPE, linkname="."), None),
        (_member("l1/l2", type=tarfile.SYMTYPE, linkname=".."), None),
        (_member("l2/evil.txt"), b"x"),
    ])
    out = tmp_path / "deep" / "out"
    with pytest.raises(ExtractError) as info:
        extract(archive, out)
    assert "l1/l2" in str(info.value) and str(archive) in str(info.value)
    assert not (tmp_path / "deep" / "evil.txt").exists()
    assert not (out / ".chain.tar.gz.extracted").exists()


def test_setuid_member_is_refused_by_the_fallback_and_stripped_by_the_filter(tmp_path, monkeypatch):
    archive = _tar_with_info(tmp_path / "suid.tar.gz", [(_member("bin/tool", mode=0o4755), b"#!/bin/sh\n")])
    out = extract(archive, tmp_path / "filtered")  # the "data" filter drops the bit
    assert not (out / "bin/tool").stat().st_mode & 0o7000
    _without_extraction_filters(monkeypatch)
    with pytest.raises(ExtractError, match=r"member 'bin/tool' has mode 4755 \(setuid/setgid/sticky bit\)"):
        extract(archive, tmp_path / "fallback")
    assert not (tmp_path / "fallback" / "bin" / "tool").exists()


@pytest.mark.parametrize("filters", [True, False], ids=["data-filter", "fallback"])
@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_device_and_fifo_members_are_refused(tmp_path, monkeypatch, filters, kind):
    if not filters:
        _without_extraction_filters(monkeypatch)
    archive = _tar_with_info(tmp_path / "dev.tar.gz",
                             [(_member("ok.txt"), b"x"), (_member("dev/null2", type=kind), None)])
    with pytest.raises(ExtractError, match=r"'dev/null2' is a device or fifo"):
        extract(archive, tmp_path / "o")
    assert not (tmp_path / "o" / "ok.txt").exists()  # checked before anything is written
