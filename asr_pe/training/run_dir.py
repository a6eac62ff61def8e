"""The run directory as training uses it: what may change on resume, and the data preparation that
rank 0 does first (where it is, Hydra's output folder or ``run_dir``: `asr_pe.training.run.Run.open`).
Its layout and the files other layers read (config, run_info, checkpoints, eval/) are
`asr_pe.run_folder`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from asr_pe.errors import UserError
from asr_pe.io import atomic_write_json
from asr_pe.run_folder import DATA_READY, PREPARED_FILES, config_path, has_checkpoints

# Sections that define the model and its data; a resumed run must not change them.
MODEL_SECTIONS = ("data", "frontend", "encoder", "pe", "loss", "decoder")
# Top-level keys that name the run in every table (run_info.json: its seed and its study arm):
# fixed at the first start, or a resume would relabel a trained run
IDENTITY_KEYS = ("seed", "arm")
# Keys of those sections that only say how batches are loaded, not what they hold: a run may
# resume with other values (e.g. a study moved from one 2-thread run with a feature worker to
# two 1-thread runs without one).
FREE_ON_RESUME = {"data": ("num_workers", "loader_timeout_s")}


class ResumeConflict(UserError, ValueError):
    """A resume that would change what the run's model is or what it trains on."""


def check_resume_compatible(run_dir: Path, cfg: DictConfig) -> None:
    saved_path = config_path(run_dir)
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

    for key in IDENTITY_KEYS:
        if (saved.get(key) or None) != (now.get(key) or None):
            raise ResumeConflict(
                f"cannot resume {run_dir}: {key}={now.get(key)!r} differs from the run's {key}={saved.get(key)!r} "
                f"(config.yaml); a run keeps the identity it was started with: start a new run_dir for another {key}")
    for key in MODEL_SECTIONS:
        if section(saved, key) != section(now, key):
            raise ResumeConflict(
                f"cannot resume {run_dir}: config section {key!r} differs from the saved config.yaml "
                f"(resume with the same model/data settings; only trainer/optim/eval may change)"
            )


def read_json(path: Path, default: Any = None) -> Any:
    """A JSON file's content, or ``default`` when it is missing or unreadable (e.g. half written)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def data_key(cfg: DictConfig, leave_out: tuple[str, ...] = ()) -> str:
    """Identifies the data a run prepares (its resolved ``data`` section, less the keys ``leave_out``)."""
    data = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if k not in leave_out}
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class PreparedDataMismatch(UserError, ValueError):
    """The run folder's tokenizer / CMVN were made for other data settings than the config's."""


def artifacts_key(cfg: DictConfig) -> str:
    """Identifies what the prepared files depend on: the ``data`` section without the keys that
    only say how batches are loaded (`FREE_ON_RESUME`)."""
    return data_key(cfg, FREE_ON_RESUME["data"])


def check_prepared_data(run_dir: Path, key: str) -> None:
    """Reuse the run folder's ``tokenizer.json`` / ``cmvn.json`` only when they were made for the
    same data settings (``key``, `artifacts_key`, recorded in ``DATA_READY`` when preparation
    finished). Files of a preparation that never finished (no record) were made for unknown
    settings and nothing has trained on them yet: they are removed and made again. A record of
    other settings is refused. (Records written before this check existed carry no key and are
    trusted, like files of a run that has checkpoints.)"""
    run_dir = Path(run_dir)
    present = [name for name in PREPARED_FILES if (run_dir / name).exists()]
    if not present:
        return
    state = read_json(run_dir / DATA_READY)
    if state is None or state.get("error"):
        if has_checkpoints(run_dir):
            return  # a run from before the record existed: its model was trained on these files
        for name in present:
            (run_dir / name).unlink()
        print(f"[asr_pe] {run_dir}: {', '.join(present)} of an unfinished data preparation removed; preparing again",
              flush=True)
        return
    recorded = state.get("artifacts_key")
    if recorded is not None and recorded != key:
        raise PreparedDataMismatch(
            f"{run_dir}: {', '.join(present)} were prepared for other data settings than this config's "
            f"'data' section (tokenizer, features, corpus); a model would train on mismatched files. "
            f"Use another run_dir, or delete {', '.join(present)} and {DATA_READY} to prepare them again")


def prepare_on_rank_zero(run_dir: Path, key: str, rank: int, prepare, *, timeout_s: float = 6 * 3600.0,
                         poll_s: float = 2.0, artifacts: str | None = None):
    """Run ``prepare()`` on rank 0 first; the other ranks wait for it, then run it themselves.

    Data preparation writes files (corpus manifests, tokenizer, SentencePiece model, CMVN) that
    every rank then reads. Rank 0 prepares and writes ``DATA_READY`` (atomically) naming ``key``;
    the other ranks wait for that file and then call ``prepare()``, which finds every file in
    place and only reads. This needs no process group (under SLURM all tasks start at once,
    before Lightning initialises one). With ``artifacts`` (`artifacts_key`) rank 0 first checks
    the files an earlier launch left (`check_prepared_data`) and records the key. A failure on rank 0 is written to the file too, so the
    others stop with its message instead of waiting. A file left by an earlier launch with the
    same key is a valid signal: preparation writes each file once and never rewrites it.
    """
    import time

    marker = Path(run_dir) / DATA_READY
    if rank == 0:
        if artifacts is not None:
            check_prepared_data(run_dir, artifacts)
        try:
            result = prepare()
        except BaseException as e:
            atomic_write_json(marker, {"key": key, "artifacts_key": artifacts, "error": f"{type(e).__name__}: {e}"})
            raise
        atomic_write_json(marker, {"key": key, "artifacts_key": artifacts, "error": None})
        return result
    start = last_note = time.monotonic()
    while True:
        state = read_json(marker)
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
