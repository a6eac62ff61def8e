"""Starting a run: fresh or resumed, with which config, from which checkpoint.

* ``resume`` is ``true`` / ``false`` / ``auto`` and nothing else (``resume=no`` was a non-empty
  string, so it resumed).
* ``false`` needs a folder that holds no run yet (a folder name that collides with an earlier
  run's is refused, never shared); ``true`` needs a checkpoint to continue from; ``auto``
  continues when there is one, starts otherwise, and skips a finished run.
* A resumed run's config is its own ``config.yaml``: ``train.py run_dir=<dir> resume=true`` needs
  nothing else. The keys given on the command line replace the saved ones (the trainer, the
  optimiser, evaluation; a model or data key that differs from the saved one is refused by
  `check_resume_compatible`), and ``config.yaml`` is rewritten with what the run now uses.
  A group that sets keys all over the config (``experiment=...``, ``@package _global_``) makes
  the whole composed config the one compared and used: a sweep that is re-run with its original
  command line resumes each of its runs unchanged.
* A checkpoint without ``config.yaml`` beside it is refused: the settings it was trained with are
  unknown, and the new ones would relabel it.
* The resume point is the newest readable ``last*.ckpt`` by its stored step (`resume_checkpoint`),
  and a killed process' partial writes are removed first (`remove_partial_writes`). Which
  checkpoints are saved when (``last.ckpt``, ``best.ckpt``), and how they are written atomically,
  is `asr_pe.training.callbacks`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from asr_pe.errors import FolderTakenError, UserError
from asr_pe.evaluation.provenance import checkpoint_step as stored_step
from asr_pe.inference.run_loading import read_checkpoint
from asr_pe.io import atomic_write_json
from asr_pe.run_folder import CHECKPOINT_SUFFIX, LAST, RESUMES, RUN_CONTENT, checkpoint_dir, config_path, eval_done

from .hydra_job import EVERYTHING
from .run_dir import MODEL_SECTIONS, check_resume_compatible, read_json

log = logging.getLogger(__name__)

RESUME_VALUES = {"true": True, "false": False, "auto": "auto"}

_ABSENT = object()


class ResumeError(UserError, ValueError):
    """A start that cannot go on as asked (bad ``resume``, nothing to resume, a folder in use)."""


def parse_resume(value: Any) -> bool | str:
    """``True`` / ``False`` / ``"auto"`` from the config value (YAML booleans or the three words)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in RESUME_VALUES:
        return RESUME_VALUES[text]
    raise ResumeError(f"resume={value!r} is not one of true, false, auto "
                      f"(true: continue the run in run_dir; auto: continue it if it has a checkpoint; false: start)")


def resumed_config(cfg: DictConfig, run_dir: Path, keys: set[str] | str) -> DictConfig:
    """The config a resumed run uses: its saved ``config.yaml`` with the command line's ``keys``
    taken from ``cfg`` (or all of ``cfg`` for `EVERYTHING`). Sections the command line did not
    touch are the saved ones; the trainer, optimiser and evaluation sections get options added
    since the run was saved (from ``cfg``'s defaults); the model and data sections stay exactly as
    trained."""
    saved_path = config_path(run_dir)
    if keys == EVERYTHING or not saved_path.exists():
        return cfg
    saved = OmegaConf.to_container(OmegaConf.load(saved_path))
    now = OmegaConf.to_container(cfg, resolve=True)
    out: dict[str, Any] = {}
    for key in {*now, *saved}:
        if key not in now and (key in keys or key not in saved):
            continue  # deleted on the command line (~key)
        if key in keys or key not in saved:
            out[key] = now[key]
        elif key in now and key not in MODEL_SECTIONS:
            out[key] = _with_missing(saved[key], now[key])
        else:
            out[key] = saved[key]
    merged = OmegaConf.create(out)
    for key in sorted(k for k in keys if "." in k):
        value = OmegaConf.select(cfg, key, default=_ABSENT)
        if value is _ABSENT:  # deleted on the command line (~a.b)
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(merged, parent)
            if isinstance(node, DictConfig) and leaf in node:
                del node[leaf]
        else:
            OmegaConf.update(merged, key, value, merge=False, force_add=True)
    merged.run_dir = str(run_dir)
    merged.resume = now.get("resume")
    return merged


def _with_missing(saved: Any, now: Any) -> Any:
    if isinstance(saved, dict) and isinstance(now, dict):
        return {**{k: v for k, v in now.items() if k not in saved},
                **{k: _with_missing(v, now.get(k)) for k, v in saved.items()}}
    return saved


@dataclass
class StartPlan:
    skip: bool = False                  # finished run under resume=auto
    checkpoint: Path | None = None      # resume from it
    step: int = 0                       # its global step


def plan_start(run_dir: Path, cfg: DictConfig, resume: bool | str, *, owner: bool) -> StartPlan:
    """Decide how the run starts; raise `ResumeError` / `FileExistsError` with one line otherwise.

    ``owner``: this process owns the folder (global rank 0, holding the lock). Only the owner
    checks that a fresh start gets an unused folder: the other DDP ranks start once rank 0 has
    already written the run's first files."""
    run_dir = Path(run_dir)
    found = resume_checkpoint(run_dir)
    if found is None and resume is not False:
        # checkpoints there, none readable: resuming would silently start over; name the file
        for damaged in sorted(checkpoint_dir(run_dir).glob("last*.ckpt")):
            read_checkpoint(damaged, mmap=True,  # its structure, tensors mapped
                            hint="delete it (or move it aside) and resume from another checkpoint in that folder, "
                                 "or start a fresh run")
    if resume == "auto" and eval_done(run_dir):
        return StartPlan(skip=True)
    if resume is False and owner:
        # what in the folder shows that a run already used it (a file, a folder not empty)
        used = [name for name in RUN_CONTENT
                if (p := run_dir / name).is_file() or (p.is_dir() and any(p.iterdir()))]
        if used:
            what = f"a checkpoint ({found[0].name})" if found else ", ".join(used)
            raise FolderTakenError(
                f"{run_dir} already holds a run ({what}); pass resume=true to continue it "
                f"or choose another run_dir")
    if resume is True and found is None:
        raise ResumeError(f"resume=true, but {run_dir} holds no checkpoint to continue from "
                          f"(checkpoints/last.ckpt); start it with resume=auto or resume=false")
    has_config = config_path(run_dir).exists()
    if found is not None and not has_config:
        raise ResumeError(
            f"cannot resume {run_dir}: it has a checkpoint but no config.yaml, so the settings the "
            f"checkpoint was trained with are unknown; restore config.yaml or start a new run_dir")
    if found is not None and resume is not False:  # a folder that never trained has no identity yet
        check_resume_compatible(run_dir, cfg)
    if found is None:
        return StartPlan()
    return StartPlan(checkpoint=found[0], step=found[1])


def checkpoint_step(path: Path) -> int | None:
    """The ``global_step`` stored in a checkpoint; None when it cannot be read (truncated, foreign)."""
    try:
        step = stored_step(path)
        if step is None:
            raise KeyError("global_step")
        return step
    except Exception as e:  # a damaged file is skipped, never resumed from
        log.warning("checkpoint %s cannot be read (%s: %s); not resuming from it", path, type(e).__name__, e)
        return None


def resume_checkpoint(run_dir: Path) -> tuple[Path, int] | None:
    """The newest readable resume point of the run: ``last.ckpt``, or a ``last-v<k>.ckpt`` that an
    older version of the toolkit (Lightning's version counter) wrote, by stored step; ties go to
    ``last.ckpt``. None when the run has no checkpoint."""
    candidates = sorted(checkpoint_dir(run_dir).glob(f"{LAST}*{CHECKPOINT_SUFFIX}"),
                        key=lambda p: (p.name != f"{LAST}{CHECKPOINT_SUFFIX}", p.name))
    readable = [(path, step) for path in candidates if (step := checkpoint_step(path)) is not None]
    return max(readable, key=lambda found: found[1], default=None)  # the first of the highest step


def remove_partial_writes(run_dir: Path) -> None:
    """Delete the hidden temporary files (``.<name>.<random>.tmp``, `asr_pe.io`) that a process
    killed in the middle of an atomic write left anywhere in the run folder (a checkpoint's is as
    large as the model). Call only while holding the run's lock: another live process may be
    writing them."""
    removed = [tmp for tmp in Path(run_dir).rglob(".*.tmp") if tmp.is_file()]
    for tmp in removed:
        tmp.unlink()
    if removed:
        log.info("removed %d partial write(s) of an interrupted process: %s", len(removed),
                 ", ".join(str(p.relative_to(run_dir)) for p in removed))


def flattened(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"optim.lr": 1e-3, ...}``: the leaves of nested dicts by dotted key (``prefix`` + the path)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(flattened(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def settings_changed(saved: Any, now: Any) -> dict[str, list]:
    """``{"optim.lr": [old, new], ...}`` between two plain configs (run folder and resume flag
    left out: they name the start, not the run)."""
    a, b = flattened(saved), flattened(now)
    return {k: [a.get(k), b.get(k)] for k in sorted({*a, *b})
            if a.get(k) != b.get(k) and k not in ("run_dir", "resume")}


def record_resume(run_dir: Path, plan: StartPlan, changed: dict[str, list]) -> None:
    """Append this resume to ``resumes.json``: where it continued and which settings changed."""
    path = Path(run_dir) / RESUMES   # one entry per resume: step, checkpoint, settings changed
    entries = read_json(path, [])
    entries.append({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "checkpoint": plan.checkpoint.name,
                    "step": plan.step, "changed": changed})
    atomic_write_json(path, entries)


