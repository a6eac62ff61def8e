"""The run folder: the one place that says what a run directory holds and where.

A run folder is the contract between training (which writes it), evaluation, the plots and
the recipes (which read it). Its layout, as ``train.py`` and ``evaluate.py`` write it::

    <run_dir>/
      config.yaml             the resolved config the run trains with (rewritten on resume)
      run_info.json           what the result tables read: pe, loss, encoder, seed, data,
                              train_max_duration, train_hours, parameters, remedy, arm, label,
                              data_report
      tokenizer.json          made by data preparation ...
      cmvn.json               ... and reused by every later launch (`PREPARED_FILES`)
      .data_ready.json        rank 0's record that data preparation finished (and for which data)
      .lock                   held by the train.py that owns the folder
      resumes.json            one entry per resume: step, checkpoint, settings changed
      checkpoints/last.ckpt   every checkpoint.every_n_train_steps steps and at the end
      checkpoints/best.ckpt   lowest val/cer
      logs/metrics.csv        every logged step once, across resumes (CSV logger)
      tb/                     TensorBoard events
      .hydra/                 Hydra's record of how the run was launched
      eval/<set><suffix>/     one evaluation of one test set: per_utt.jsonl, buckets.csv,
                              buckets.md, buckets.meta.json (written last; its checkpoint and
                              settings records decide reuse, asr_pe/evaluation/reuse.py)
                              (+ in_context.{json,md} for a long-form set evaluated beside its parts)
      eval/done.json          the evaluation after training finished: its test sets and checkpoint
      eval/ladder/            the length-ladder evaluation: report.md, choice.json

Only the standard library, OmegaConf and `asr_pe.io` are imported here, so every layer of the
package (training, evaluation, inference, plots) and the recipes' small ``python -m`` calls can
read a run folder without loading torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from asr_pe.errors import MissingFileError
from asr_pe.io import atomic_write_json, atomic_write_text, json_object

# ----------------------------------------------------------------------------- names

CONFIG = "config.yaml"
RUN_INFO = "run_info.json"
TOKENIZER = "tokenizer.json"
CMVN = "cmvn.json"
# What data preparation writes into the run folder and later launches reuse as they are.
PREPARED_FILES = (TOKENIZER, CMVN)
DATA_READY = ".data_ready.json"   # written by rank 0 once the run's data files exist
LOCK = ".lock"
RESUMES = "resumes.json"
HYDRA = ".hydra"

CHECKPOINTS = "checkpoints"
LAST = "last"                      # checkpoints/last.ckpt: the resume point
BEST = "best"                      # checkpoints/best.ckpt: lowest val/cer
CHECKPOINT_SUFFIX = ".ckpt"

LOGS = "logs"                      # the CSV logger's folder (its "version")
METRICS = "metrics.csv"
TENSORBOARD = "tb"

EVAL = "eval"
PER_UTT = "per_utt.jsonl"
BUCKETS_CSV = "buckets.csv"
BUCKETS_MD = "buckets.md"
BUCKETS_META = "buckets.meta.json"
# The files every evaluated set has (buckets.meta.json too when written by evaluate_run).
EVAL_FILES = (PER_UTT, BUCKETS_CSV, BUCKETS_MD)

# Files and folders only a run writes (Hydra's own `.hydra/` and `<job>.log` are not among them:
# Hydra writes them into the folder before the run starts).
RUN_CONTENT = (CONFIG, RUN_INFO, CHECKPOINTS, TOKENIZER, CMVN, DATA_READY, LOGS, EVAL)

# ----------------------------------------------------------------------------- paths


def config_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / CONFIG


def run_info_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / RUN_INFO


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def checkpoint_path(run_dir: str | Path, name: str = LAST) -> Path:
    """``checkpoints/<name>.ckpt`` (``last``, ``best``)."""
    return checkpoint_dir(run_dir) / f"{name}{CHECKPOINT_SUFFIX}"


def find_checkpoint(run_dir: str | Path, which: str = BEST) -> Path:
    """The checkpoint an evaluation loads: ``checkpoints/<which>.ckpt``; ``best`` falls back to
    ``last`` (a run too short to validate has no best). FileNotFoundError naming both."""
    candidates = [checkpoint_path(run_dir, which)] + ([checkpoint_path(run_dir, LAST)] if which == BEST else [])
    found = next((p for p in candidates if p.exists()), None)
    if found is None:
        raise MissingFileError(f"no checkpoint {which!r} in {checkpoint_dir(run_dir)} "
                                f"(looked for {[p.name for p in candidates]})")
    return found


def has_checkpoints(run_dir: str | Path) -> bool:
    return any(checkpoint_dir(run_dir).glob(f"*{CHECKPOINT_SUFFIX}"))   # nothing when it is no folder


def logs_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / LOGS


def metrics_path(run_dir: str | Path) -> Path:
    return logs_dir(run_dir) / METRICS


def eval_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / EVAL


def result_name(test_set: str, suffix: str = "") -> str:
    """The name of one evaluation's folder under ``eval/``: the test set, then ``eval.suffix`` (or
    the inference remedy's suffix), which keeps several decodings of one set side by side
    (``test``, ``test_joint``, ``test_chunked20``)."""
    return f"{test_set}{suffix}"


def result_dir(run_dir: str | Path, test_set: str, suffix: str = "") -> Path:
    """``eval/<test set><suffix>/``: per_utt.jsonl, buckets.csv, buckets.md, buckets.meta.json."""
    return eval_dir(run_dir) / result_name(test_set, suffix)


def result_names(run_dir: str | Path) -> list[str]:
    """Names of the ``eval/<name>/`` folders of a run that hold a ``buckets.csv``, sorted."""
    return sorted(p.parent.name for p in eval_dir(run_dir).glob(f"*/{BUCKETS_CSV}"))


def ladder_dir(run_dir: str | Path) -> Path:
    """``eval/ladder/``: the length-ladder report and choice."""
    return eval_dir(run_dir) / "ladder"


def eval_done_path(run_dir: str | Path) -> Path:
    return eval_dir(run_dir) / "done.json"


# ----------------------------------------------------------------------------- config.yaml


def read_config(run_dir: str | Path) -> DictConfig:
    """The run's saved ``config.yaml`` (FileNotFoundError: not a run directory)."""
    path = config_path(run_dir)
    if not path.exists():
        raise MissingFileError(f"{run_dir} is not a run directory (no {CONFIG})")
    return OmegaConf.load(path)


def write_config(run_dir: str | Path, cfg: DictConfig) -> None:
    """``config.yaml``, resolved (interpolations replaced by their values), atomically."""
    atomic_write_text(config_path(run_dir), OmegaConf.to_yaml(cfg, resolve=True))


# ----------------------------------------------------------------------------- run_info.json


def read_run_info(run_dir: str | Path, error: type[Exception] = ValueError) -> dict:
    """``run_info.json`` as a dict; invalid JSON or a non-object raises ``error("<path>:<line>: ...")``."""
    path = run_info_path(run_dir)
    return json_object(path.read_text(encoding="utf-8"), path, error)


def write_run_info(run_dir: str | Path, info: Mapping[str, Any]) -> None:
    atomic_write_json(run_info_path(run_dir), dict(info), sort_keys=True)


def is_run_dir(path: str | Path) -> bool:
    """A folder whose results can be read: it holds ``run_info.json`` (a trained run, or another
    system scored with score.py)."""
    return run_info_path(path).is_file()


# ----------------------------------------------------------------------------- eval/done.json


def mark_eval_done(run_dir: str | Path, test_sets: list[str], checkpoint: dict | None = None) -> None:
    """Record that the evaluation after training covered ``test_sets`` (see `eval_done`), with the
    checkpoint record (`asr_pe.evaluation.provenance.checkpoint_record`) it was computed from."""
    atomic_write_json(eval_done_path(run_dir), {"test_sets": sorted(test_sets), "checkpoint": checkpoint})


def clear_eval_done(run_dir: str | Path) -> None:
    """Before training (more): the run is not finished until its new checkpoint is evaluated, so an
    older marker must not survive a training that is stopped or fails."""
    eval_done_path(run_dir).unlink(missing_ok=True)


def eval_done(run_dir: str | Path) -> bool:
    """A run is finished when its evaluation after training completed and its results are still
    that evaluation's: ``eval/done.json`` names its test sets and checkpoint, and each set's folder
    has its files and records that same checkpoint (``buckets.meta.json``). The marker is written
    after the last set, so a run killed between two test sets is not finished; a set replaced
    since by another checkpoint's decoding makes the run unfinished again (``resume=auto``
    evaluates it again), instead of a finished run whose tables hold an older model's numbers."""
    try:
        done = json.loads(eval_done_path(run_dir).read_text())
        sets, checkpoint = done["test_sets"], done.get("checkpoint")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (bool(sets) and all((result_dir(run_dir, s) / f).exists() for s in sets for f in EVAL_FILES)
            and (checkpoint is None or all(_recorded_checkpoint(result_dir(run_dir, s)) == checkpoint for s in sets)))


def _recorded_checkpoint(folder: Path) -> Any:
    try:
        return json.loads((folder / BUCKETS_META).read_text()).get("checkpoint")
    except (OSError, ValueError, AttributeError):
        return None


# ----------------------------------------------------------------------------- labels


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
    pmap = (cfg.get("encoder") or {}).get("position_map") or {}
    if pmap.get("kind") == "scale":
        lo, hi = pmap.get("range")
        parts.append(f"posscale:{float(lo):g}-{float(hi):g}")
    elif pmap.get("kind") == "randomized":
        parts.append(f"randpos:{float(pmap.get('max_seconds')):g}")
    concat = (cfg.get("data") or {}).get("concat_max_seconds")
    if concat:
        parts.append(f"concat:{float(concat):g}")
    return "+".join(parts)


def run_label(run: Mapping[str, Any]) -> str:
    """What result tables group a run's seeds by: ``<pe>/<loss>``, then its training remedy and
    its study arm (``arm``) when set: ``rope/ctc posscale:1-32``, ``none/ctc [frontend70]``.

    ``run`` is the run's config (its ``pe`` and ``loss`` sections), from which train.py computes
    the label, or its ``run_info.json`` record, which stores that label (``label``; a record
    without one, e.g. an external system's, is ``<pe>/<loss>`` as recorded)."""
    if not isinstance(run.get("pe"), Mapping):   # a run_info.json record
        return str(run.get("label") or f"{run.get('pe', '?')}/{run.get('loss', '?')}")
    label = f"{pe_label(run['pe'])}/{run['loss']['name']}"
    remedy = training_remedy(run)
    return label + (f" {remedy}" if remedy else "") + (f" [{run['arm']}]" if run.get("arm") else "")


__all__ = [
    "BEST", "BUCKETS_CSV", "BUCKETS_MD", "BUCKETS_META", "CHECKPOINTS", "CMVN", "CONFIG", "DATA_READY", "EVAL",
    "EVAL_FILES", "LAST", "LOCK", "LOGS", "METRICS", "PER_UTT", "PREPARED_FILES", "RESUMES", "RUN_CONTENT", "RUN_INFO",
    "TOKENIZER", "checkpoint_dir", "checkpoint_path", "clear_eval_done", "config_path", "eval_dir", "eval_done",
    "eval_done_path", "find_checkpoint", "has_checkpoints", "is_run_dir", "ladder_dir", "logs_dir", "mark_eval_done",
    "metrics_path", "pe_label", "read_config", "read_run_info", "result_dir", "result_name", "result_names",
    "run_info_path", "run_label", "training_remedy", "write_config", "write_run_info",
]
