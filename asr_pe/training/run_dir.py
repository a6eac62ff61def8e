"""The run directory: where it is, whether it is finished, and what may change on resume."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from asr_pe.io import atomic_write_json, atomic_write_text

# Sections that define the model and its data; a resumed run must not change them.
MODEL_SECTIONS = ("data", "frontend", "encoder", "pe", "loss", "decoder")
# Keys of those sections that only say how batches are loaded, not what they hold: a run may
# resume with other values (e.g. a study moved from one 2-thread run with a feature worker to
# two 1-thread runs without one).
FREE_ON_RESUME = {"data": ("num_workers",)}


def resolve_run_dir(cfg: DictConfig) -> Path:
    """Hydra's output folder when running under Hydra (sweeps too), else ``cfg.run_dir``."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.output_dir)
    except ImportError:  # pragma: no cover - hydra is a dependency
        pass
    return Path(cfg.run_dir)


def last_checkpoint(run_dir: Path) -> Path | None:
    p = Path(run_dir) / "checkpoints" / "last.ckpt"
    return p if p.exists() else None


EVAL_DONE = Path("eval") / "done.json"   # written once the evaluation after training has finished
EVAL_FILES = ("per_utt.jsonl", "buckets.csv", "buckets.md")


def mark_eval_done(run_dir: Path, test_sets: list[str], checkpoint: dict | None = None) -> None:
    """Record that the evaluation after training covered ``test_sets`` (see `eval_done`), with the
    checkpoint record (`asr_pe.training.provenance.checkpoint_record`) it was computed from."""
    atomic_write_json(Path(run_dir) / EVAL_DONE, {"test_sets": sorted(test_sets), "checkpoint": checkpoint})


def clear_eval_done(run_dir: Path) -> None:
    """Before training (more): the run is not finished until its new checkpoint is evaluated, so an
    older marker must not survive a training that is stopped or fails."""
    (Path(run_dir) / EVAL_DONE).unlink(missing_ok=True)


def eval_done(run_dir: Path) -> bool:
    """A run is finished when its evaluation after training completed: ``eval/done.json`` names
    its test sets and each has its three files. The marker is written after the last set, so a
    run killed between two test sets (``eval/test`` done, ``eval/longform`` not yet begun) is not
    finished, and re-running it evaluates again instead of skipping it."""
    marker = Path(run_dir) / EVAL_DONE
    try:
        sets = json.loads(marker.read_text())["test_sets"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    eval_dir = Path(run_dir) / "eval"
    return bool(sets) and all((eval_dir / s / f).exists() for s in sets for f in EVAL_FILES)


def pe_label(pe: Mapping[str, Any]) -> str:
    """Label of a `pe` config: its name, or ``input+attention`` for a merged combination."""
    stages = [pe.get(s) for s in ("input", "attention") if pe.get(s)]
    if len(stages) == 2:
        return "+".join(str(s.get("label", s["name"])) for s in stages)
    return str(pe.get("name", "none"))


def training_remedy(cfg: Mapping[str, Any]) -> str:
    """The training-time length remedy of a run config, "" for none: ``posscale:<lo>-<hi>`` /
    ``randpos:<s>`` (encoder.position_map), ``concat:<s>`` (data.concat_max_seconds), joined by '+'."""
    parts = []
    pmap = (cfg.get("encoder") or {}).get("position_map")
    if pmap:
        if pmap.get("kind") == "scale":
            lo, hi = pmap.get("range")
            parts.append(f"posscale:{float(lo):g}-{float(hi):g}")
        elif pmap.get("kind") == "randomized":
            parts.append(f"randpos:{float(pmap.get('max_seconds')):g}")
    concat = (cfg.get("data") or {}).get("concat_max_seconds")
    if concat:
        parts.append(f"concat:{float(concat):g}")
    return "+".join(parts)


def run_label(cfg: Mapping[str, Any]) -> str:
    """What result tables group a run's seeds by: ``<pe>/<loss>``, then its training remedy and
    its study arm (``arm``) when set: ``rope/ctc posscale:1-32``, ``none/ctc [frontend70]``."""
    label = f"{pe_label(cfg['pe'])}/{cfg['loss']['name']}"
    remedy = training_remedy(cfg)
    if remedy:
        label += f" {remedy}"
    if cfg.get("arm"):
        label += f" [{cfg['arm']}]"
    return label


def check_resume_compatible(run_dir: Path, cfg: DictConfig) -> None:
    saved_path = Path(run_dir) / "config.yaml"
    if not saved_path.exists():
        return
    saved = OmegaConf.load(saved_path)
    now = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))

    def without_nulls(value):
        # an option added later with a null default ("off") must not block resuming older runs
        if isinstance(value, dict):
            return {k: without_nulls(v) for k, v in value.items() if v is not None}
        return value

    def section(c: DictConfig, key: str):
        value = OmegaConf.to_container(c[key]) if c.get(key) is not None else None
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in FREE_ON_RESUME.get(key, ())}
        return without_nulls(value)

    for key in MODEL_SECTIONS:
        if section(saved, key) != section(now, key):
            raise ValueError(
                f"cannot resume {run_dir}: config section {key!r} differs from the saved config.yaml "
                f"(resume with the same model/data settings; only trainer/optim/eval may change)"
            )


def write_json_atomic(path: Path, obj: Any) -> None:
    atomic_write_json(path, obj, sort_keys=True)


def set_aside_metrics(run_dir: Path) -> None:
    """Before a resumed fit: keep the earlier ``logs/metrics.csv`` (Lightning's CSV logger would
    overwrite it) as ``logs/metrics.part<k>.csv``; `merge_metrics` joins the parts afterwards."""
    logs = Path(run_dir) / "logs"
    current = logs / "metrics.csv"
    if current.exists():
        k = len(list(logs.glob("metrics.part*.csv")))
        os.replace(current, logs / f"metrics.part{k}.csv")


def merge_metrics(run_dir: Path) -> None:
    """Write ``logs/metrics.csv`` as all parts in order (union of columns), atomically."""
    logs = Path(run_dir) / "logs"
    parts = sorted(logs.glob("metrics.part*.csv"), key=lambda p: int(p.stem.split("part")[1]))
    if not parts:
        return
    files = parts + ([logs / "metrics.csv"] if (logs / "metrics.csv").exists() else [])
    rows, columns = [], []
    for f in files:
        with open(f, newline="") as fh:
            reader = csv.DictReader(fh)
            columns += [c for c in reader.fieldnames or [] if c not in columns]
            rows += list(reader)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(logs / "metrics.csv", buf.getvalue())
    for p in parts:
        p.unlink()


DATA_READY = ".data_ready.json"  # written by rank 0 once the run's data files exist


def data_key(cfg: DictConfig) -> str:
    """Identifies the data a run prepares (its resolved ``data`` section)."""
    import hashlib

    text = json.dumps(OmegaConf.to_container(cfg.data, resolve=True), sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def prepare_on_rank_zero(run_dir: Path, key: str, rank: int, prepare, *, timeout_s: float = 6 * 3600.0,
                         poll_s: float = 2.0):
    """Run ``prepare()`` on rank 0 first; the other ranks wait for it, then run it themselves.

    Data preparation writes files (corpus manifests, tokenizer, SentencePiece model, CMVN) that
    every rank then reads. Rank 0 prepares and writes ``DATA_READY`` (atomically) naming ``key``;
    the other ranks wait for that file and then call ``prepare()``, which finds every file in
    place and only reads. This needs no process group (under SLURM all tasks start at once,
    before Lightning initialises one). A failure on rank 0 is written to the file too, so the
    others stop with its message instead of waiting. A file left by an earlier launch with the
    same key is a valid signal: preparation writes each file once and never rewrites it.
    """
    import time

    marker = Path(run_dir) / DATA_READY
    if rank == 0:
        try:
            result = prepare()
        except BaseException as e:
            atomic_write_json(marker, {"key": key, "error": f"{type(e).__name__}: {e}"})
            raise
        atomic_write_json(marker, {"key": key, "error": None})
        return result
    start = last_note = time.monotonic()
    while True:
        try:
            state = json.loads(marker.read_text())
        except (OSError, ValueError):
            state = None
        if state is not None and state.get("key") == key:
            if state.get("error"):
                raise RuntimeError(f"rank 0 failed to prepare the data of {run_dir}: {state['error']}")
            return prepare()
        now = time.monotonic()
        if now - start > timeout_s:
            raise TimeoutError(f"rank {rank}: rank 0 did not prepare the data of {run_dir} within "
                               f"{timeout_s:.0f} s (no {marker} with key {key[:8]})")
        if now - last_note > 60:
            print(f"[asr_pe] rank {rank}: waiting for rank 0 to prepare the data ({now - start:.0f} s)", flush=True)
            last_note = now
        time.sleep(poll_s)
