"""Evaluation settings (``eval:``): their defaults and how a run's own and a caller's combine.

Evaluation settings are resolved the same way for the evaluation that follows ``train.py``
and for ``evaluate.py run=<dir>``: `EVAL_DEFAULTS` (conf/eval/default.yaml), then the run's own
``config.yaml`` ``eval:`` section, then the caller's values that are not null (`eval_settings`).
``evaluate.py`` passes only the ``eval`` keys given on its command line, so a later evaluation
buckets, blocks and decodes on the device exactly as the one after training did unless a key is
given. Every value is checked before any model is loaded (`check_eval_settings`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

from asr_pe.errors import UserError
from asr_pe.evaluation.buckets import resolve_edges
from asr_pe.evaluation.rate import RateError, check_rate_settings
from asr_pe.inference.full_context import resolve_block_size
from asr_pe.inference.remedies import RemedyError, parse_remedies
from asr_pe.inference.transcribe import MODES

# The evaluation settings when neither the run's config.yaml nor the caller sets them: the one
# definition in conf/eval/default.yaml (the group train.py and evaluate.py compose).
EVAL_DEFAULTS: dict[str, Any] = OmegaConf.to_container(
    OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "eval" / "default.yaml"))


class EvalSettingsError(UserError, ValueError):
    """A bad ``eval.*`` setting (unknown key, bad edges, block size, mode, suffix or number)."""


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def eval_settings(run_eval: Mapping[str, Any] | None, override_eval: Mapping[str, Any] | None) -> dict[str, Any]:
    """`EVAL_DEFAULTS` < the run's own ``eval:`` (its config.yaml) < the caller's non-null values.

    A null at either level means "not set here" (a run's ``train_length_s: null`` keeps the default). The caller's keys must be known ones (a typo would otherwise be ignored)."""
    run_eval, override_eval = dict(_plain(run_eval) or {}), dict(_plain(override_eval) or {})
    unknown = sorted(set(override_eval) - set(EVAL_DEFAULTS))
    if unknown:
        raise EvalSettingsError(f"unknown eval setting(s) {unknown}; known: {sorted(EVAL_DEFAULTS)}")
    settings = dict(EVAL_DEFAULTS)
    # keys of older run configs that this version no longer has are left out
    for source in (run_eval, override_eval):
        settings.update({k: v for k, v in source.items() if v is not None and k in EVAL_DEFAULTS})
    check_eval_settings(settings)
    return settings


def check_eval_settings(settings: Mapping[str, Any]) -> None:
    """Reject bad settings before any model is loaded or audio decoded (EvalSettingsError)."""
    try:
        resolve_edges(settings["edges"], [])
        resolve_block_size(settings["block_size"], 1, 1)
    except ValueError as e:
        raise EvalSettingsError(f"eval: {e}") from None
    try:
        parse_remedies(settings["remedy"])
    except RemedyError as e:
        raise EvalSettingsError(str(e)) from None
    if settings["train_length_s"] is not None and not (
            isinstance(settings["train_length_s"], (int, float)) and settings["train_length_s"] > 0):
        raise EvalSettingsError(f"eval.train_length_s={settings['train_length_s']!r}: must be a number of seconds > 0")
    try:
        check_rate_settings(settings)
    except RateError as e:
        raise EvalSettingsError(str(e)) from None
    if settings["mode"] not in MODES:
        raise EvalSettingsError(f"eval.mode={settings['mode']!r}: choose one of {MODES}")
    # eval.suffix names a folder beside the others (eval/test, eval/test_joint, ...)
    if not re.fullmatch(r"[A-Za-z0-9_.+-]*", str(settings["suffix"])):
        raise EvalSettingsError(f"eval.suffix={settings['suffix']!r}: use letters, digits and _ . + - only "
                                "(it names a folder)")
    for key, low, strict in (("n_boot", 0, False), ("batch_seconds", 0, True), ("chunk_s", 0, True),
                             ("overlap_s", 0, False)):
        value = settings[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < low or (strict and value == low):
            raise EvalSettingsError(f"eval.{key}={value!r}: must be a number {'>' if strict else '>='} {low}")


__all__ = ["EVAL_DEFAULTS", "EvalSettingsError", "check_eval_settings", "eval_settings"]
