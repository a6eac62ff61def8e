"""Schedules per optimizer step: the learning rate (a multiplier of the peak LR), and a run's end and
validations (`step_schedule`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asr_pe.errors import ConfigError


def lr_multiplier(step: int, *, kind: str, warmup_steps: int, total_steps: int | None = None,
                  min_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate at ``step`` (0-based).

    * ``noam`` / ``inverse_sqrt``: linear warmup to 1 at ``warmup_steps``, then
      sqrt(warmup/step) (the Transformer's schedule with the peak LR set directly);
    * ``cosine``: linear warmup, then cosine decay to ``min_ratio`` at ``total_steps``;
    * ``constant``: linear warmup, then 1.
    """
    step = step + 1
    warm = max(1, warmup_steps)
    if step <= warm:
        return step / warm
    if kind in ("noam", "inverse_sqrt"):
        return max(min_ratio, math.sqrt(warm / step))
    if kind == "cosine":
        assert total_steps and total_steps > warm, "cosine schedule needs total_steps > warmup_steps"
        progress = min(1.0, (step - warm) / (total_steps - warm))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    if kind == "constant":
        return 1.0
    raise ValueError(f"unknown schedule {kind!r}; choose noam, inverse_sqrt, cosine or constant")


@dataclass(frozen=True)
class StepSchedule:
    """A training run in steps: when it ends and when it validates (every ``val_every`` batches, or
    Lightning's time-based ``val_check_interval`` as given)."""
    max_steps: int
    val_every: int | str | dict | None
    batches_per_epoch: int


def step_schedule(trainer_cfg: Mapping[str, Any], batches_per_epoch: int) -> StepSchedule:
    """``trainer.max_epochs`` / ``check_val_every_n_epoch`` in the steps they mean for this run's data.

    Training draws its batches as a function of the step (`asr_pe.data.sampler.StepBatches`), one
    endless stream: epochs are counted by the run, not by Lightning. An epoch is
    ``batches_per_epoch`` batches of one rank, ``ceil(batches_per_epoch / accumulate_grad_batches)``
    optimizer steps. ``max_steps`` and ``max_epochs`` both set: the earlier end. Validation every
    ``k`` epochs is every ``k x batches_per_epoch`` batches, where Lightning validated at the end of
    every k-th epoch; with ``check_val_every_n_epoch: null`` an integer ``val_check_interval`` counts
    batches over the whole run as in Lightning, and a time-based one is Lightning's."""
    accumulate = int(trainer_cfg.get("accumulate_grad_batches", 1) or 1)
    steps_per_epoch = math.ceil(batches_per_epoch / accumulate)
    max_steps = int(trainer_cfg.get("max_steps", -1))
    max_epochs = int(trainer_cfg.get("max_epochs") or -1)  # null: no epoch limit, as -1
    ends = [n for n in (max_steps, max_epochs * steps_per_epoch) if n > 0]  # the limits set
    if not ends:
        raise ConfigError("trainer.max_steps and trainer.max_epochs are both unset (-1): training would never "
                          "end; set trainer.max_steps (or trainer.max_epochs)")
    limit = trainer_cfg.get("limit_train_batches")
    if isinstance(limit, float) and limit != 1.0:
        raise ConfigError(f"trainer.limit_train_batches={limit}: the training loader is an endless stream of steps "
                          "here (no length to take a fraction of); give a number of batches, or trainer.max_steps")
    every_n_epochs = trainer_cfg.get("check_val_every_n_epoch", 1)
    interval = trainer_cfg.get("val_check_interval")
    if every_n_epochs is None:
        if interval is None or isinstance(interval, float):
            raise ConfigError(f"trainer.check_val_every_n_epoch=null needs trainer.val_check_interval in batches "
                              f"(an integer) or as a time, got {interval!r}")
        val_every = interval
    else:
        if interval not in (None, 1.0):
            raise ConfigError(
                f"trainer.val_check_interval={interval!r} with trainer.check_val_every_n_epoch={every_n_epochs}: "
                f"asr_pe validates every k epochs (check_val_every_n_epoch=k) or every n batches "
                f"(check_val_every_n_epoch=null val_check_interval=n; an epoch here is {batches_per_epoch} batches)")
        val_every = int(every_n_epochs) * batches_per_epoch
    return StepSchedule(max_steps=min(ends), val_every=val_every, batches_per_epoch=batches_per_epoch)
