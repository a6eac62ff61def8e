"""``logs/metrics.csv`` across resumes: every step once, in order, whatever ended a launch.

Lightning's CSV logger deletes ``metrics.csv`` when a fit starts logging, so before a resumed fit
the earlier rows are set aside as ``logs/metrics.part0.csv`` and joined back afterwards; the join
runs however the fit ends (a ``finally``), and a start that finds parts left by a process killed
outright (``kill -9``: no ``finally``) joins them first. Rows of steps at or after the checkpoint
being resumed from are dropped when they are set aside: that launch trained them after its last
checkpoint, and the resumed one trains (and logs) those steps again.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from asr_pe.io import atomic_write_text
from asr_pe.run_folder import METRICS, logs_dir



def _parts(logs: Path) -> list[Path]:
    return sorted(logs.glob("metrics.part*.csv"), key=lambda p: int(p.stem.split("part")[1]))


def _read(files: list[Path]) -> tuple[list[str], list[dict]]:
    rows, columns = [], []
    for f in files:
        with open(f, newline="") as fh:
            reader = csv.DictReader(fh)
            columns += [c for c in reader.fieldnames or [] if c not in columns]
            rows += list(reader)
    return columns, rows


def _write(path: Path, columns: list[str], rows: list[dict]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def _step(row: dict) -> float:
    try:
        return float(row.get("step") or 0)
    except ValueError:
        return 0.0


def set_aside_metrics(run_dir: Path, resume_step: int) -> None:
    """Before a resumed fit: the rows so far (every part and ``metrics.csv``), less those of steps
    ``>= resume_step``, become ``logs/metrics.part0.csv``; ``metrics.csv`` is left for the fit."""
    logs = logs_dir(run_dir)
    files = _parts(logs) + ([logs / METRICS] if (logs / METRICS).exists() else [])
    if not files:
        return
    columns, rows = _read(files)
    kept = [r for r in rows if _step(r) < resume_step]
    _write(logs / "metrics.part0.csv", columns, kept)
    for f in files:
        if f.name != "metrics.part0.csv":
            f.unlink()


def merge_metrics(run_dir: Path) -> None:
    """Write ``logs/metrics.csv`` as all parts in order (union of columns), atomically."""
    logs = logs_dir(run_dir)
    parts = _parts(logs)
    if not parts:
        return
    files = parts + ([logs / METRICS] if (logs / METRICS).exists() else [])
    columns, rows = _read(files)
    _write(logs / METRICS, columns, rows)
    for p in parts:
        p.unlink()
