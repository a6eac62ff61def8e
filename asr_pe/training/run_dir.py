"""The run directory: where it is, whether it is finished, and what may change on resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from asr_pe.io import atomic_write_json

# Sections that define the model and its data; a resumed run must not change them.
MODEL_SECTIONS = ("data", "frontend", "encoder", "pe", "loss", "decoder")
# Keys of those sections that only say how batches are loaded, not what they hold: a run may
# resume with other values (e.g. a study moved from one 2-thread run with a feature worker to
# two 1-thread runs without one).
FREE_ON_RESUME = {"data": ("num_workers", "loader_timeout_s")}


def resolve_run_dir(cfg: DictConfig) -> Path:
    """Hydra's output folder when running under Hydra (sweeps too), else ``cfg.run_dir``."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.output_dir)
    except ImportError:  # pragma: no cover - hydra is a dependency
        pass
    return Path(cfg.run_dir)


def hydra_output_subdir(output_dir: str) -> str:
    """Where Hydra saves a start's config, overrides and its own config in the run folder:
    ``.hydra`` the first time, ``.hydra/start-<date>_<time>`` on a later start into the same
    folder (a resume), so the record of how the run was first launched is never overwritten."""
    import time

    first = Path(output_dir) / ".hydra"
    if not (first / "config.yaml").exists():
        return ".hydra"
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    sub, k = f"start-{stamp}", 1
    while (first / sub).exists():
        sub, k = f"start-{stamp}-{k}", k + 1
    return f".hydra/{sub}"


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
    ``randpos:<s>`` (encoder.position_map), ``concat:<s>`` (data.concat_max_seconds), joined by '+';
    ``finetune`` first for a run started from another run's weights (``init_from``)."""
    parts = ["finetune"] if cfg.get("init_from") else []
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


class ResumeConflict(ValueError):
    """A resume that would change what the run's model is or what it trains on."""


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
            raise ResumeConflict(
                f"cannot resume {run_dir}: config section {key!r} differs from the saved config.yaml "
                f"(resume with the same model/data settings; only trainer/optim/eval may change)"
            )


def write_json_atomic(path: Path, obj: Any) -> None:
    atomic_write_json(path, obj, sort_keys=True)


DATA_READY = ".data_ready.json"  # written by rank 0 once the run's data files exist


def data_key(cfg: DictConfig) -> str:
    """Identifies the data a run prepares (its resolved ``data`` section)."""
    import hashlib

    text = json.dumps(OmegaConf.to_container(cfg.data, resolve=True), sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


# What data preparation writes into the run folder and later launches reuse as they are.
PREPARED_FILES = ("tokenizer.json", "cmvn.json")


class PreparedDataMismatch(ValueError):
    """The run folder's tokenizer / CMVN were made for other data settings than the config's."""


def artifacts_key(cfg: DictConfig) -> str:
    """Identifies what the prepared files depend on: the ``data`` section without the keys that
    only say how batches are loaded (`FREE_ON_RESUME`)."""
    import hashlib

    data = OmegaConf.to_container(cfg.data, resolve=True)
    data = {k: v for k, v in data.items() if k not in FREE_ON_RESUME["data"]}
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


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
    try:
        state = json.loads((run_dir / DATA_READY).read_text())
    except (OSError, ValueError):
        state = None
    if state is None or state.get("error"):
        if (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").glob("*.ckpt")):
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
