"""What training prints: the run's step out of ``max_steps`` with loss, lr and an ETA, and no noise.

Lightning's bars count the batches of an epoch, while a run here is defined by
``trainer.max_steps``; they have no overall ETA, and in a redirected log (every SLURM job, CI) a
``\\r``-refreshed bar is a wall of control characters. `StepProgress` replaces them (it is a
Lightning ``ProgressBar``, so Lightning adds no bar of its own):

- on a terminal, one line rewritten at most twice a second;
- in a file or pipe, a plain line every ``every_n_steps`` steps and at the last one;
- after each validation, one line with its metrics.

    [asr_pe] step 400/1200 (33%)  loss 1.234  lr 1.20e-03  0.45 s/step  ETA 6m00s

Only global rank 0 prints. The ETA is the remaining steps times the mean step time of this start
(the first step, which builds the graph and the loaders, left out).

`conventional_logging` silences what a user cannot act on: Lightning's own console handlers under
Hydra's (every record twice), its "Tip:" advertisements, the model summary's ``Total FLOPs: 0``
(it counts none for these models), torch's ``LeafSpec`` deprecation raised inside Lightning, the
"smaller than the logging interval" warning of short smoke runs, and the CSV logger's "Previous log
files in this directory will be deleted" on resume (`asr_pe.training.run` keeps them; the
run prints its own account).
"""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from typing import IO

from lightning.pytorch.callbacks import ProgressBar

__all__ = ["StepProgress", "conventional_logging", "format_duration"]


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class StepProgress(ProgressBar):
    def __init__(self, every_n_steps: int = 50, stream: IO[str] | None = None, tty: bool | None = None):
        super().__init__()
        self.every_n_steps = max(1, int(every_n_steps))
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self._enabled = True
        self._t0 = self._step0 = None
        self._last_draw = 0.0
        self._open_line = False

    # ProgressBar's switches (Lightning turns bars off in some stages)
    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    def _write(self, text: str, *, rewrite: bool = False) -> None:
        if self._open_line and not rewrite:
            self.stream.write("\n")  # below the line a terminal rewrites
        self.stream.write("\r" + text.ljust(100) if rewrite else text + "\n")
        self._open_line = rewrite
        self.stream.flush()

    def line(self, trainer) -> str:
        step, total = int(trainer.global_step), int(trainer.max_steps or -1)
        parts = [f"[asr_pe] step {step}/{total} ({100 * step / total:.0f}%)" if total > 0 else f"[asr_pe] step {step}"]
        loss = trainer.callback_metrics.get("train/loss")
        if loss is not None:
            parts.append(f"loss {float(loss):.3f}")
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.2e}")
        done = step - (self._step0 or 0)
        if self._t0 is not None and done > 0:
            per_step = (time.monotonic() - self._t0) / done
            parts.append(f"{per_step:.2f} s/step")
            if total > 0:
                parts.append(f"ETA {format_duration((total - step) * per_step)}")
        return "  ".join(parts)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not (self._enabled and trainer.is_global_zero):
            return
        if self._t0 is None:  # after the first step of this start: its setup is not a step's cost
            self._t0, self._step0 = time.monotonic(), int(trainer.global_step)
            return
        step, last = int(trainer.global_step), int(trainer.max_steps or -1)
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw >= 0.5 or step == last:
                self._last_draw = now
                self._write(self.line(trainer), rewrite=True)
        elif step % self.every_n_steps == 0 or step == last:
            self._write(self.line(trainer))

    def on_validation_end(self, trainer, pl_module) -> None:
        if not (self._enabled and trainer.is_global_zero) or trainer.sanity_checking:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        if metrics:
            shown = "  ".join(f"{k} {v:.4g}" for k, v in sorted(metrics.items()))
            self._write(f"[asr_pe] step {int(trainer.global_step)} validation: {shown}")

    def on_train_end(self, trainer, pl_module) -> None:
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False


# ---------------------------------------------------------------------- noise

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")


def _drop_tips(record: logging.LogRecord) -> bool:  # a logging filter (a callable is one)
    return "Tip:" not in str(record.msg)


def _drop_zero_flops(record: logging.LogRecord) -> bool:
    if "Total FLOPs: 0" in str(record.msg):
        record.msg = "\n".join(line for line in str(record.msg).splitlines() if "Total FLOPs: 0" not in line)
    return True


QUIET_WARNINGS = (r".*LeafSpec.*is deprecated", r"The number of training batches .* is smaller than the logging interval",
                  r"Experiment logs directory .* exists and is not empty")


def conventional_logging() -> None:
    """One line per log record and none a user cannot act on (the module docstring lists them)."""
    if logging.getLogger().handlers:
        for name in LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            for handler in list(logger.handlers):
                if type(handler) is logging.StreamHandler:  # Lightning's own console handler
                    logger.removeHandler(handler)
            logger.propagate = True
    for name, drop in (("lightning.pytorch.utilities.rank_zero", _drop_tips),
                       ("lightning.fabric.utilities.rank_zero", _drop_tips),
                       ("lightning.pytorch.callbacks.model_summary", _drop_zero_flops)):
        logger = logging.getLogger(name)
        if drop not in logger.filters:
            logger.addFilter(drop)
    for message in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
