"""A study's archived run results as one compressed table, and run paths that resolve through it.

A study folder (``recipes/synth/study/runs``, ``.../seeds``, ``.../arms/conformer``, ...) keeps
its runs' small result files (``run_info.json``, ``config.yaml``, ``eval/<set>/buckets.csv``,
``buckets.meta.json``, ``per_utt.jsonl``, ``attention_stats/``) in ``<study>/results.jsonl.xz``:
one JSON object a line, xz (lzma), one row per per-utterance record, bucket row or attention row,
and one per small file. Every row has ``run`` (the run folder's name), ``path`` (the file inside the
run folder) and ``kind``:

    utt        a line of eval/<set>/per_utt.jsonl, its fields as columns
    bucket     a row of eval/<set>/buckets.csv, its cells as columns
    attention  a row of attention_stats/attention_stats.csv
    csv_row, jsonl_row   a row of another CSV / JSON-lines file
    csv_header before a CSV file's rows: ``data`` holds its column order and number formats
    json       a JSON file (run_info.json, buckets.meta.json) in the column ``data``
    text       any other file (config.yaml, attention_stats.md) verbatim in the column ``text``

Rows under ``eval/`` also carry ``set`` (the test set, from buckets.meta.json) and ``suffix``
(the rest of the folder name: ``_rope_ntk``, ``_chunked``, ...). Read it with pandas::

    pd.read_json("recipes/synth/study/runs/results.jsonl.xz", lines=True).query("kind == 'utt'")

or ``xzcat recipes/synth/study/runs/results.jsonl.xz | grep '"run": "rope_ctc_s0"'``.

Why xz and not gzip: a study's runs repeat the same references (every run of a study, every rung
of the length ladder), usually more than gzip's 32 kB window apart; lzma's window of megabytes
finds them (the length ladder's table: 3.6 MB as gzip, 0.84 MB as xz), and it reads as fast.
Tables written as gzip (``results.jsonl.gz``) are still read where a study has no xz table, and
``convert`` rewrites them as xz.

A CSV cell is stored as a number where it prints back as the same text (``"0"``, ``"1.6552"``,
and ``"7.0000"`` in a column written with four decimals; ``"nan"`` and ``"inf"`` stay strings),
so `render_run` gives back every file byte for byte; `table_rows` checks that for each file and
stores a file that would not round-trip as text.

The readers (plots, study summary, in-context tables) keep one file-based code path: a run
path such as ``recipes/synth/study/runs/rope_ctc_s0`` that is not a folder on disk is found in
its parent's table by `locate`, written out once per table version to a cache folder whose files
are exactly the run folder's, so a table cannot read differently from the files it holds.
``<study>/<pattern>`` (``runs/*_ctc_s*``, e.g. a shell glob that matched nothing on disk)
names the table's runs that match. Live run folders are read in place, as before.

``python -m asr_pe.results_table add <study> <run folder>...`` adds or replaces runs (what
``recipes/synth/run.sh`` stage 4 does); ``list`` prints a study's run paths; ``check`` compares a
table with run folders; ``drop`` removes superseded runs; ``convert`` rewrites a study's gzip table as xz, checking that every file
renders back byte for byte, and removes the gzip one.

The table is a database of runs. ``add`` reads, changes and writes it under one lock
(`table_lock`), so concurrent adds all land. A run is named by its folder's name (the readers'
``<study>/<run>``) and that name stays bound to one run: its identity is `RUN_IDENTITY` of its
run_info.json (system, label, pe, loss, encoder, arm, data, seed, training remedy, init_from:
fixed at the run's first start). Two folders of one name in one call, a folder whose name the
table holds for a run of another identity, and a folder that lacks files the table holds for
its run (e.g. per-utterance scores a study reads) are refused unless ``--replace``; a run
re-added with results of other checkpoints is reported as such. ``--remove`` deletes a folder
only once the table holding it is on disk and, read back, renders every file of it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import fnmatch
import gzip
import hashlib
import io
import json
import lzma
import math
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from asr_pe.errors import ConfigError
from asr_pe.io import atomic_write_bytes
from asr_pe.run_folder import BUCKETS_CSV, BUCKETS_META, CONFIG, EVAL, PER_UTT, RUN_INFO

__all__ = [
    "TABLE_NAME", "GZIP_TABLE_NAME", "ResultsTableError", "archived_files", "table_rows", "render_run",
    "read_table", "write_table", "table_of", "add_runs", "convert_table", "runs_in", "locate", "logical_path",
    "expand_run_paths", "drop_runs", "main", "RUN_IDENTITY", "is_remedy_result", "run_identity", "table_lock",
]

TABLE_NAME = "results.jsonl.xz"
# the name tables had when they were gzip: still read (a study without an xz table), never written
GZIP_TABLE_NAME = "results.jsonl.gz"
# xz's default preset. Measured on the ten committed tables (40 MB of JSON lines; CPU seconds of
# Python's lzma on this project's 2-core machine, under load): preset 3: 2.84 MB, compressed in
# 7.9 s; preset 5: 2.54 MB, 14.7 s; preset 6: 2.40 MB, 20.3 s; preset 9: 2.40 MB, 24.7 s; preset
# 3 extreme: 2.36 MB, 37.7 s (gzip -9: 8.64 MB). The length ladder's table alone: preset 3 1.04 MB
# in 3.4 s, preset 6 0.84 MB in 9.9 s. Reading takes 0.2-0.3 s for all ten at any preset (gzip:
# 0.2 s). Beyond 6 the size stops falling; a table is written once per `add` (seconds, next to the
# hours a run trains) but every version of it stays in git, so the smaller size is worth the time.
XZ_PRESET = 6
_XZ_MAGIC = b"\xfd7zXZ\x00"
# The columns every row has; a file whose own fields use one of these names is stored as text.
RESERVED = ("run", "path", "kind", "set", "suffix", "data", "text")


class ResultsTableError(ConfigError):
    """A table that cannot be read or written; the message names the file (and line)."""


# ----------------------------------------------------------------------------- what a run archives

def archived_files(run_dir: Path, remedy_utts: bool = False) -> list[str]:
    """The files of a run that its archive keeps, as paths inside the run folder, sorted.

    run_info.json and config.yaml; per evaluated set buckets.csv, buckets.meta.json and
    per_utt.jsonl, except that an inference remedy's or chunked inference's folder
    (eval/test_window, ...) keeps its bucket tables, which every table and figure reads, without
    the per-utterance scores (~200 kB a set: a study's remedies would double the archive) unless
    ``remedy_utts`` (a study that reports a remedy's in-context ratio needs them);
    attention_stats/ where scripts/attention_vs_length.py was run. No checkpoints."""
    run_dir = Path(run_dir)
    out = [name for name in (RUN_INFO, CONFIG) if (run_dir / name).is_file()]
    for set_dir in sorted(p for p in (run_dir / EVAL).glob("*/") if p.is_dir()):
        meta = set_dir / BUCKETS_META
        utts = remedy_utts or not (meta.is_file() and is_remedy_result(meta))
        names = (BUCKETS_CSV, BUCKETS_META) + ((PER_UTT,) if utts else ())
        out += [f"{EVAL}/{set_dir.name}/{n}" for n in names if (set_dir / n).is_file()]
    out += [f"attention_stats/{n}" for n in ("attention_stats.csv", "attention_stats.md")
            if (run_dir / "attention_stats" / n).is_file()]
    return sorted(out)


def is_remedy_result(meta_path: Path) -> bool:
    """Whether an eval folder holds an inference remedy's or chunked inference's results, read from
    its buckets.meta.json: a non-empty ``remedy`` or ``mode`` ``chunked``, at the top level (what
    evaluate.py writes beside a remedy's results) or in the recorded ``settings`` (what the reuse
    check compares). Every evaluation records ``"remedy": ""`` in its settings, so the key alone
    says nothing: matching it dropped the plain decoding's per-utterance scores."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ResultsTableError(f"{meta_path}: not a JSON object ({e}); evaluate the set again") from None
    if not isinstance(meta, dict):
        raise ResultsTableError(f"{meta_path}: not a JSON object; evaluate the set again")
    settings = meta.get("settings")
    levels = [meta] + ([settings] if isinstance(settings, dict) else [])
    return any(bool(level.get("remedy")) or level.get("mode") == "chunked" for level in levels)


# ----------------------------------------------------------------------------- files <-> rows

def _fixed_decimals(cells: list[str]) -> int | None:
    """k when every number among ``cells`` is written with exactly k decimals (``%.4f``: "7.0000")
    and at least one is; None otherwise."""
    numbers = [c for c in cells if re.fullmatch(r"-?[0-9]+\.[0-9]+", c)]
    ks = {len(c.split(".")[1]) for c in numbers}
    # an integer cell ("7") is no number written with k decimals, so it fails the column too
    if len(ks) != 1 or any(not re.fullmatch(r"-?[0-9]+\.[0-9]+|nan|-?inf|", c) for c in cells):
        return None
    k = ks.pop()
    return k if all(f"{float(c):.{k}f}" == c for c in numbers) else None


def _cell(text: str, decimals: int | None):
    """A CSV cell as a number where the number prints back as the same text (with the column's
    fixed decimals, else as Python prints it), else the text ("nan", "inf", labels)."""
    if decimals is not None:
        return float(text) if re.fullmatch(r"-?[0-9]+\.[0-9]+", text) else text
    if re.fullmatch(r"-?[0-9]+", text) and str(int(text)) == text:
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) and repr(value) == text else text


def _cell_text(value, decimals: int | None) -> str:
    if isinstance(value, float):
        return f"{value:.{decimals}f}" if decimals is not None else repr(value)
    return str(value)


_KIND_OF_NAME = {"per_utt.jsonl": "utt", "buckets.csv": "bucket", "attention_stats.csv": "attention"}
_KIND_OF_SUFFIX = {".csv": "csv_row", ".jsonl": "jsonl_row", ".json": "json"}


def _kind(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    suffix = "".join(name.rpartition(".")[1:])   # from the last dot on ("" and the whole name without one)
    return _KIND_OF_NAME.get(name) or _KIND_OF_SUFFIX.get(suffix, "text")


CSV_HEADER = "csv_header"   # the kind of a CSV file's first row: its column order and number formats


def _render(rows: list[dict]) -> str:
    """The text of one file from its rows (all rows of one run and path, in order)."""
    kind = rows[0]["kind"]
    if kind == "text":
        return rows[0]["text"]
    if kind == "json":
        return json.dumps(rows[0]["data"], indent=2, sort_keys=True) + "\n"
    if kind == CSV_HEADER:
        columns, decimals = rows[0]["data"]["columns"], rows[0]["data"]["decimals"]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(
            [columns] + [[_cell_text(r[k], decimals.get(k)) for k in columns] for r in rows[1:]])
        return buf.getvalue()
    return "".join(json.dumps({k: v for k, v in r.items() if k not in RESERVED}) + "\n" for r in rows)


def _rows_of_file(kind: str, text: str) -> list[dict] | None:
    """The rows of one file (without run and path), or None where the kind does not apply (then
    it is stored as text). A CSV file's rows follow one `CSV_HEADER` row."""
    if kind == "json":
        return [{"kind": kind, "data": json.loads(text)}]
    if kind in ("utt", "jsonl_row"):
        rows = [json.loads(line) for line in text.splitlines()]
        if not rows or not all(isinstance(r, dict) for r in rows) or any(k in RESERVED for r in rows for k in r):
            return None
        return [{"kind": kind, **r} for r in rows]
    if kind in ("bucket", "attention", "csv_row"):
        table = list(csv.reader(io.StringIO(text)))
        columns = table[0] if table else []
        if (len(table) < 2 or any(len(r) != len(columns) for r in table) or len(set(columns)) != len(columns)
                or any(k in RESERVED for k in columns)):
            return None
        decimals = {k: d for i, k in enumerate(columns)
                    if (d := _fixed_decimals([r[i] for r in table[1:]])) is not None}
        return [{"kind": CSV_HEADER, "data": {"columns": columns, "decimals": decimals}}] + [
            {"kind": kind, **{k: _cell(c, decimals.get(k)) for k, c in zip(columns, r)}} for r in table[1:]]
    return None


def _eval_columns(rel: str, files: dict[str, str]) -> dict:
    """``set`` and ``suffix`` of a file under eval/<set><suffix>/ (the set from buckets.meta.json)."""
    parts = rel.split("/")
    if len(parts) != 3 or parts[0] != "eval":
        return {}
    folder = test_set = parts[1]
    with contextlib.suppress(TypeError, ValueError, AttributeError):   # no meta file, not JSON, not an object
        name = json.loads(files.get(f"eval/{folder}/buckets.meta.json")).get("test_set")
        if isinstance(name, str) and folder.startswith(name):
            test_set = name
    return {"set": test_set, "suffix": folder[len(test_set):]}


def table_rows(run: str, files: dict[str, str]) -> list[dict]:
    """The table rows of one run from its files (path inside the run -> text), paths sorted.
    A file whose rows would not render back to the same text is stored as text."""
    out = []
    for rel, text in sorted(files.items()):
        extra = _eval_columns(rel, files)
        try:
            rows = [{"run": run, "path": rel, "kind": r.pop("kind"), **extra, **r}
                    for r in _rows_of_file(_kind(rel), text) or []]
        except ValueError:
            rows = []
        if rows and _render(rows) == text:
            out += rows
        else:
            out.append({"run": run, "path": rel, "kind": "text", **extra, "text": text})
    return out


def render_run(rows: Iterable[dict]) -> dict[str, str]:
    """Path inside the run -> file text, from one run's rows."""
    grouped: dict[str, list[dict]] = {}
    for r in rows:
        grouped.setdefault(r["path"], []).append(r)
    return {rel: _render(rs) for rel, rs in grouped.items()}


# ----------------------------------------------------------------------------- the table file

def read_table(path: str | os.PathLike) -> dict[str, list[dict]]:
    """Run name -> its rows, in table order (an xz table, or a gzip one written before xz)."""
    path = Path(path)
    runs: dict[str, list[dict]] = {}
    try:
        # xz, or gzip for a table written before xz: told apart by the first bytes, whatever the name
        with open(path, "rb") as f:
            opener = lzma.open if f.read(len(_XZ_MAGIC)) == _XZ_MAGIC else gzip.open
        with opener(path, "rt", encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                try:
                    row = json.loads(line)
                    runs.setdefault(row["run"], []).append(row)
                except (ValueError, KeyError, TypeError) as e:
                    raise ResultsTableError(f"{path}:{line_no}: not a results row ({e})") from None
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise ResultsTableError(f"{path}: cannot read the results table ({e})") from None
    return runs


def write_table(path: str | os.PathLike, runs: dict[str, list[dict]]) -> None:
    """Write runs (name -> rows) sorted by name as xz (`XZ_PRESET`), atomically; xz stores no time
    or name, so the same runs give the same bytes."""
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for run in sorted(runs) for row in runs[run])
    atomic_write_bytes(path, lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_XZ, preset=XZ_PRESET))


def table_of(study: str | os.PathLike) -> Path:
    """A study's table: ``<study>/results.jsonl.xz``, or its ``results.jsonl.gz`` where only that
    one exists (a table written before xz). Both is an error: one of them is out of date (e.g. a
    merge that kept a gzip table runs were added to beside the xz one converted before)."""
    study = Path(study)
    gz, xz = study / GZIP_TABLE_NAME, study / TABLE_NAME
    if gz.is_file() and xz.is_file():
        raise ResultsTableError(f"{study} holds both {TABLE_NAME} and {GZIP_TABLE_NAME}: remove the out-of-date one "
                                f"(python -m asr_pe.results_table convert {study} rewrites the gzip one as xz "
                                f"once the xz one is gone)")
    return gz if gz.is_file() else xz


def _is_table(path: Path) -> bool:
    return path.name in (TABLE_NAME, GZIP_TABLE_NAME) and path.is_file() and table_of(path.parent) == path


# ----------------------------------------------------------------------------- adding runs

# The fields of run_info.json that say which run a folder holds: set at the run's first start (a
# resume may not change them) and what the readers group runs by. A table names a run by its
# folder's name, the readers' <study>/<run> path; `add` keeps that name bound to one identity.
RUN_IDENTITY = ("system", "label", "pe", "loss", "encoder", "arm", "data", "seed", "remedy", "init_from")


@contextlib.contextmanager
def table_lock(study: str | os.PathLike) -> Iterator[None]:
    """An exclusive flock on ``<study>/.results.jsonl.xz.lock`` for one read-modify-write of the
    study's table, so that two writers at once each start from what the other wrote. The file is
    removed on release (a study folder is committed: nothing may be left in it); a waiter that gets
    the lock of a file removed meanwhile tries again, so two holders never overlap."""
    path = Path(study) / f".{TABLE_NAME}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:   # another writer holds it: say so (a wait, not a hang)
                print(f"[results_table] waiting for another writer of {path.parent / TABLE_NAME}", file=sys.stderr)
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        # locked; go on unless the file was removed or replaced meanwhile (then lock the new one)
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.stat(path), os.fstat(fd)):
                break
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(path)
        os.close(fd)


def run_identity(rows: Iterable[dict]) -> dict:
    """`RUN_IDENTITY` of a run's rows (its run_info.json); an empty value and a missing key alike
    are None, so a run_info written before a field existed reads as the run it is."""
    text = render_run(r for r in rows if r["path"] == RUN_INFO).get(RUN_INFO, "{}")
    info = {}
    with contextlib.suppress(ValueError):
        info = json.loads(text)
    info = info if isinstance(info, dict) else {}
    return {k: None if info.get(k) == "" else info.get(k) for k in RUN_IDENTITY}


def _checkpoints(rows: Iterable[dict]) -> str:
    """The checkpoints a run's archived results were decoded from, as "step N (sha256 prefix)"."""
    metas = (r.get("data") for r in rows if r["kind"] == "json" and r["path"].endswith("/buckets.meta.json"))
    cks = (meta.get("checkpoint") for meta in metas if isinstance(meta, dict))
    found = {f"step {ck.get('global_step')} ({str(ck.get('sha256'))[:12]})" for ck in cks if isinstance(ck, dict)}
    return ", ".join(sorted(found)) or "none recorded"


def _incoming_runs(run_dirs: Iterable[str | os.PathLike], remedy_utts: bool) -> dict[str, tuple[Path, list[dict]]]:
    """Name -> (folder, rows) of the run folders to add. Two folders of one name are refused: the
    table names a run by its folder's name, so one would silently replace the other."""
    out: dict[str, tuple[Path, list[dict]]] = {}
    for d in map(Path, run_dirs):
        if not (d / RUN_INFO).is_file():
            raise ResultsTableError(f"{d}: not a run folder (no {RUN_INFO})")
        if d.name in out:
            first = out[d.name][0]
            if first.resolve() == d.resolve():
                continue  # one folder given twice (e.g. by a glob and by its path)
            raise ResultsTableError(f"{first} and {d} are both named {d.name!r}: a study's table names a run by its "
                                    f"folder's name, so one would replace the other; rename one of them and add both")
        files = {rel: (d / rel).read_text(encoding="utf-8") for rel in archived_files(d, remedy_utts)}
        out[d.name] = (d, table_rows(d.name, files))
    return out


def _replacement(table: Path, name: str, folder: Path, old: list[dict], new: list[dict]) -> str:
    """What adding ``folder`` (rows ``new``) does to the table's run ``name`` (rows ``old``):
    "unchanged" or "replaced ..."; refused where the folder holds another run (another
    `run_identity`) or would drop files the table holds for it (what a study reads)."""
    before, after = run_identity(old), run_identity(new)
    if before != after:
        diff = ", ".join(f"{k} {before[k]!r} -> {after[k]!r}" for k in RUN_IDENTITY if before[k] != after[k])
        raise ResultsTableError(f"{folder}: {table} holds another run named {name!r} ({diff}); rename the folder "
                                f"to add it beside that run, or pass --replace to replace it")
    lost = sorted({r["path"] for r in old} - {r["path"] for r in new})
    if lost:
        raise ResultsTableError(f"{folder}: {table} holds {len(lost)} file(s) of run {name!r} that the folder does "
                                f"not give ({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}); add it with "
                                f"--remedy-utts if the table was written with it, or pass --replace to drop them")
    if old == new:
        return "unchanged"
    was, now = _checkpoints(old), _checkpoints(new)
    return "replaced" if was == now else f"replaced (results of {was} -> {now})"


def add_runs(table: str | os.PathLike, run_dirs: Iterable[str | os.PathLike], *, remedy_utts: bool = False,
             replace: bool = False, remove: bool = False) -> dict[str, str]:
    """Add (or replace) the runs in ``run_dirs`` in ``table`` (created when absent), each with
    `archived_files`; returns name -> what happened ("added", "unchanged", "replaced ...").

    The read-modify-write holds the study's `table_lock`, so concurrent adds all land. A name the
    table holds is replaced only by the same run (`_replacement`) unless ``replace``. Adding a run
    again gives the same table. ``remove`` deletes each folder, inside the lock, once the table is
    on disk (file and directory fsynced) and, read back, renders every file of it. Where the study
    still has a gzip table, its runs are read from it and it goes once the xz table is written."""
    table = Path(table)
    incoming = _incoming_runs(run_dirs, remedy_utts)
    with table_lock(table.parent):
        source = table_of(table.parent) if table.name == TABLE_NAME else table
        runs = read_table(source) if source.exists() else {}
        report = {}
        for name, (folder, rows) in incoming.items():
            report[name] = ("added" if name not in runs else "replaced" if replace
                            else _replacement(table, name, folder, runs[name], rows))
            runs[name] = rows
        write_table(table, runs)
        if source != table:
            source.unlink()
        # make the rename durable: write_table fsyncs the table's bytes, this its directory entry
        fd = os.open(table.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if remove:
            folders = [folder for folder, _ in incoming.values()]
            _check(table, folders)  # read back from disk: every file of each folder renders
            for folder in folders:
                shutil.rmtree(folder)
    return report


def drop_runs(study: str | os.PathLike, names: Iterable[str]) -> dict[str, int]:
    """Remove the runs ``names`` from ``<study>/results.jsonl.xz`` under the study's `table_lock`;
    returns name -> the number of rows removed. A name the table lacks is an error and nothing is
    written, so a typo cannot pass for a removal. For results that are superseded (a run trained
    again from another source): git keeps the rows removed."""
    names = list(dict.fromkeys(names))
    with table_lock(study):
        table = table_of(study)
        runs = read_table(table) if table.is_file() else {}
        missing = [n for n in names if n not in runs]
        if missing:
            raise ResultsTableError(f"{table}: no run {', '.join(missing)} to drop")
        report = {n: len(runs.pop(n)) for n in names}
        write_table(Path(study) / TABLE_NAME, runs)
        if table.name != TABLE_NAME:   # a gzip table: its runs now live in the xz one
            table.unlink()
    return report


def convert_table(study: str | os.PathLike) -> tuple[Path, int]:
    """Rewrite ``<study>/results.jsonl.gz`` as ``<study>/results.jsonl.xz`` and remove the gzip
    one, once the xz table, read back, holds the same rows and renders every file of every run
    byte for byte as the gzip one did; returns (the xz table, the number of files compared)."""
    study = Path(study)
    gz, xz = study / GZIP_TABLE_NAME, study / TABLE_NAME
    with table_lock(study):
        if not gz.is_file():
            raise ResultsTableError(f"{gz}: no gzip table to convert")
        if xz.exists():
            raise ResultsTableError(f"{xz} exists already: remove the out-of-date one of the two tables ({gz.name} "
                                    f"is not converted)")
        runs = read_table(gz)
        write_table(xz, runs)
        again = read_table(xz)
        # the same rows (types and all) render the same files: rendering is a function of the rows
        if list(again) != sorted(runs) or any(again[r] != runs[r] for r in runs):
            xz.unlink()
            raise ResultsTableError(f"{xz}: does not read back the rows of {gz}")
        n = sum(len(render_run(rows)) for rows in again.values())
        gz.unlink()
    return xz, n


# ----------------------------------------------------------------------------- run paths

_extracted: dict[str, tuple[tuple, Path]] = {}   # table -> (its stat, the folder it was written to)


def _cache_root() -> Path:
    """Where tables are written out as run folders: ``$ASR_PE_CACHE/results`` (default
    ``~/.cache/asr_pe/results``), the same root the synth corpus uses."""
    return Path(os.environ.get("ASR_PE_CACHE") or Path.home() / ".cache" / "asr_pe").expanduser() / "results"


def _extract(table: Path) -> Path:
    """The folder holding every run of ``table`` as run folders.

    Written once per table content and place (the key hashes both) below `_cache_root`, so a
    second process, e.g. the next of a report's scripts, finds it done; the run folders sit at
    the study's own absolute path below the key, so that `logical_path` is a prefix away and
    the runs sort as their folders did. A changed table gets a new key, and the entries of
    its earlier versions go: an entry names its study in its ``.study`` file (a study can hold
    another's table, ``ladder/`` and ``ladder/more_pes/``, so a path inside an entry does not
    say whose it is)."""
    study = table.parent.resolve()
    st = table.stat()
    sig = (st.st_mtime_ns, st.st_size)
    if str(study) in _extracted and _extracted[str(study)][0] == sig and _extracted[str(study)][1].is_dir():
        return _extracted[str(study)][1]
    key = hashlib.sha256(str(study).encode() + b"\0" + table.read_bytes()).hexdigest()[:20]
    base = _cache_root()
    entry = base / key
    inside = study.relative_to(study.anchor)
    if not (entry / ".complete").is_file():
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{key}."))
        try:
            for run, rows in read_table(table).items():
                for rel, text in render_run(rows).items():
                    target = tmp / inside / run / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text, encoding="utf-8")
            (tmp / ".study").write_text(str(study), encoding="utf-8")
            (tmp / ".complete").write_text("")
            # earlier versions of this table; an entry without .study (written before entries named
            # their study) is left alone, as it may be another study's
            for old in base.iterdir():
                with contextlib.suppress(OSError):
                    if (old.name != key and not old.name.startswith(".")
                            and (old / ".study").read_text(encoding="utf-8") == str(study)):
                        shutil.rmtree(old, ignore_errors=True)
            os.rename(tmp, entry)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not (entry / ".complete").is_file():   # else another process wrote it first
                raise
    _extracted[str(study)] = (sig, entry / inside)
    return entry / inside


def logical_path(path: str | os.PathLike) -> Path:
    """The path a run folder written out from a table stands for (``<study>/<run>/...``,
    absolute); any other path unchanged. For what a reader prints or writes."""
    path = Path(path)
    base = _cache_root()
    if path.is_relative_to(base) and len(path.relative_to(base).parts) > 1:
        return Path(path.anchor, *path.relative_to(base).parts[1:])
    return path


def runs_in(study: str | os.PathLike) -> list[str]:
    """The names of the runs in ``<study>/results.jsonl.xz`` (none without one), sorted."""
    table = table_of(study)
    return sorted(p.name for p in _extract(table).iterdir()) if table.is_file() else []


def locate(path: str | os.PathLike) -> Path:
    """``path`` itself when it exists; else, when an ancestor ``<study>/<run>`` of it is a run in
    ``<study>/results.jsonl.xz``, the same path inside that run written out from the table;
    else ``path`` unchanged (so the caller's own "not found" applies)."""
    path = Path(path)
    if path.exists():
        return path
    for run in [path, *path.parents]:
        table = table_of(run.parent)
        if run.name and table.is_file() and not run.exists():
            root = _extract(table)
            if (root / run.name).is_dir():
                return root / run.name / path.relative_to(run)
    return path


def expand_run_paths(path: str | os.PathLike) -> list[tuple[Path, Path]] | None:
    """(logical path, readable folder) of the archived runs a path names, or None when it names
    none: ``<study>/<run>`` of a table, ``<study>/<pattern>`` (the table's runs matching it), the
    table itself (a shell's ``<study>/*``), or a folder with tables below it (every run of each)."""
    path = Path(path)
    table = table_of(path.parent)
    if not path.exists():   # <study>/<run> or <study>/<pattern>: a name without * ? [ matches only itself
        tables, pattern = [table] if table.is_file() else [], path.name
    elif path.is_dir():
        tables = sorted(t for name in (TABLE_NAME, GZIP_TABLE_NAME) for t in path.rglob(name) if _is_table(t))
        pattern = "*"
    else:
        tables, pattern = [path] if _is_table(path) else [], "*"
    found = [(t.parent / n, _extract(t) / n) for t in tables for n in runs_in(t.parent)
             if fnmatch.fnmatchcase(n, pattern)]
    return found or None


# ----------------------------------------------------------------------------- command line

def _check(table: Path, run_dirs: list[Path]) -> int:
    """Every file of each run folder equals its rendering from the table; returns the number of
    files compared, or raises naming the first difference."""
    runs = read_table(table)
    n = 0
    for d in run_dirs:
        if d.name not in runs:
            raise ResultsTableError(f"{table}: no run {d.name} (from {d})")
        rendered = render_run(runs[d.name])
        on_disk = sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())
        if sorted(rendered) != on_disk:
            raise ResultsTableError(f"{table}: run {d.name} holds {sorted(set(rendered) ^ set(on_disk))} "
                                    f"on one side only")
        for rel in on_disk:
            if rendered[rel] != (d / rel).read_text(encoding="utf-8"):
                raise ResultsTableError(f"{table}: {d.name}/{rel} differs from {d / rel}")
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asr_pe.results_table", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_add = sub.add_parser("add", help="add or replace run folders in <study>/results.jsonl.xz")
    p_add.add_argument("study", type=Path)
    p_add.add_argument("runs", nargs="*", type=Path, help="run folders (default: every run folder in <study>)")
    p_add.add_argument("--remove", action="store_true", help="delete each added run folder once the table "
                       "holds it and renders every file of it back identically")
    p_add.add_argument("--remedy-utts", action="store_true", help="keep the per-utterance scores of inference "
                       "remedies' folders too (for a remedy's in-context ratio)")
    p_add.add_argument("--replace", action="store_true", help="replace a run of the same name even when it is "
                       "another run (other run_info identity) or the folder lacks files the table holds for it")
    p_list = sub.add_parser("list", help="print <study>/<run> for each run in the table")
    p_list.add_argument("study", type=Path)
    p_list.add_argument("pattern", nargs="?", default="*")
    p_check = sub.add_parser("check", help="compare run folders with their rows in the table")
    p_check.add_argument("study", type=Path)
    p_check.add_argument("runs", nargs="+", type=Path)
    p_drop = sub.add_parser("drop", help="remove runs from <study>/results.jsonl.xz (superseded results; git keeps them)")
    p_drop.add_argument("study", type=Path)
    p_drop.add_argument("names", nargs="+", help="run names, as `list` prints them without <study>/")
    p_convert = sub.add_parser("convert", help=f"rewrite <study>/{GZIP_TABLE_NAME} as {TABLE_NAME}, checking "
                               "that every file renders back byte for byte, and remove the gzip table")
    p_convert.add_argument("studies", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for n in fnmatch.filter(runs_in(args.study), args.pattern):
                print(args.study / n)
        elif args.command == "convert":
            for study in args.studies:
                before = (study / GZIP_TABLE_NAME).stat().st_size if (study / GZIP_TABLE_NAME).is_file() else 0
                xz, n = convert_table(study)
                print(f"{xz}: {n} files render as from {GZIP_TABLE_NAME}; {before / 1e6:.2f} -> "
                      f"{xz.stat().st_size / 1e6:.2f} MB")
        elif args.command == "drop":
            for name, n in drop_runs(args.study, args.names).items():
                print(f"{name}: {n} rows removed")
        elif args.command == "check":
            print(f"{_check(table_of(args.study), args.runs)} files identical")
        else:
            table = args.study / TABLE_NAME
            runs = args.runs or sorted(p.parent for p in args.study.glob(f"*/{RUN_INFO}"))
            if not runs:
                raise ResultsTableError(f"{args.study}: no run folders (*/{RUN_INFO}) to add")
            missing = [str(d) for d in runs if not (d / RUN_INFO).is_file()]
            if missing:
                raise ResultsTableError(f"not run folders (no {RUN_INFO}): {', '.join(missing)}")
            report = add_runs(table, runs, remedy_utts=args.remedy_utts, replace=args.replace, remove=args.remove)
            for name, how in report.items():
                print(f"{name}: {how}")
            counts = Counter(how.split(" ")[0] for how in report.values())   # "replaced (results of ...)"
            print(f"{table}: {counts['added']} run(s) added, {counts['replaced']} replaced, {counts['unchanged']} "
                  f"unchanged{'; their folders removed' if args.remove else ''}")
        return 0
    except (OSError, ValueError) as e:   # ResultsTableError, and a file that is not UTF-8 text
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
