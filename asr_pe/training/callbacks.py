"""Every callback the run's trainer gets, and why each one is there (`run_callbacks`).

- `LastCheckpoint`, `BestCheckpoint`: the run's checkpoints under two fixed names (below).
- `ApplyOptimSettings`: a resumed run trains with its config's optimiser settings.
- `NonFiniteGuard`, `SigtermStop`: a diverged or SIGTERM-stopped training ends as such, at the
  same step on every rank (`asr_pe.training.stops` turns it into an exit code).
- `StepRandomState`: the random state of the training steps is in the checkpoint, so a resumed run
  trains with the weights an uninterrupted one would have.
- `StepProgress` (`asr_pe.training.progress`): the step line instead of Lightning's per-epoch bars.

**Checkpoints.** Lightning's `ModelCheckpoint` picks file names itself: with its version counter on
(the default) it writes ``last-v1.ckpt``, ``last-v2.ckpt``, ... whenever ``last.ckpt`` exists but is
not the file its restored state points at: the run folder was copied or moved (the state stores the
absolute folder), ``checkpoint.every_n_train_steps`` changed (part of the callback's state key, so
the state is not restored at all), or two processes resumed at once. It also saves ``last`` at the
end of training only when nothing was saved before, so a run of 40 steps with checkpoints every 7
ended with the step-35 weights on disk. And a copied folder's ``best.ckpt`` was replaced by the
first (worse) validation after a resume, because the best score is only restored when the folder
path is unchanged. Here: ``checkpoints/last.ckpt`` (every ``checkpoint.every_n_train_steps`` steps
and at the end of training) and ``checkpoints/best.ckpt`` (lowest ``val/cer``); no version counter;
state keys that do not depend on the path or the interval; the best score restored wherever the
folder now lives. The metric logs are flushed whenever a checkpoint is written (its
``on_save_checkpoint``), so ``logs/metrics.csv`` always holds every row the checkpoint has
trained through (`asr_pe.training.run`, `_set_aside_metrics`). They are written atomically inside
the run folder (`RunFolderCheckpointIO`, a plugin of the trainer beside these callbacks).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.trainer.states import RunningStage, TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from asr_pe.io import atomic_write_bytes
from asr_pe.run_folder import BEST, CHECKPOINT_SUFFIX, LAST, checkpoint_dir, checkpoint_path

from .lightning_private import as_saved_at_batch_end, set_sigterm_stop, take_over_sigterm
from .progress import StepProgress
from .stops import TrainingDiverged, divergence, nonfinite_limits

log = logging.getLogger(__name__)

BEST_MONITOR = "val/cer"


def run_callbacks(cfg: Mapping[str, Any], run_dir: Path) -> list[Callback]:
    """The trainer's callbacks for a run config and its folder."""
    ckpt_dir = checkpoint_dir(run_dir)
    callbacks = [LastCheckpoint(ckpt_dir, int(cfg["checkpoint"]["every_n_train_steps"])), BestCheckpoint(ckpt_dir),
                 ApplyOptimSettings(), NonFiniteGuard(nonfinite_limits(cfg.get("nonfinite"))),
                 SigtermStop(checkpoint_path(run_dir)), StepRandomState()]
    # none with trainer.enable_progress_bar=false: Lightning refuses a progress bar then
    if cfg["trainer"].get("enable_progress_bar", True):
        callbacks.append(StepProgress(every_n_steps=int(cfg.get("progress_every_n_steps") or 100)))
    return callbacks


class RunFolderCheckpointIO(TorchCheckpointIO):
    """Checkpoints written atomically inside the run folder.

    Lightning's `TorchCheckpointIO` writes through an fsspec transaction whose temporary file lives
    in ``$TMPDIR``; committing it is a rename only when ``$TMPDIR`` is on the run folder's file
    system. On a cluster it usually is not (node-local /tmp, a shared run folder), so the commit is
    a copy, and a job killed during it (a time limit, preemption) leaves a truncated ``last.ckpt``:
    the one file a requeued job resumes from. Here the temporary file is in the checkpoint's own
    folder, so the final step is always an atomic ``os.replace``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        atomic_write_bytes(path, buffer.getvalue())


class _RunCheckpoint(ModelCheckpoint):
    """Shared behaviour: flush the loggers when a checkpoint is written (the CSV logger otherwise writes
    every 100 steps, and a kill would lose the rows between its last write and the checkpoint).
    Lightning calls ``on_save_checkpoint`` of every callback for every checkpoint, a SIGTERM stop's
    included, before the file is written."""

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        for logger in trainer.loggers:
            logger.save()


class LastCheckpoint(_RunCheckpoint):
    """``last.ckpt`` every ``every_n_train_steps`` steps and after the final step."""

    def __init__(self, dirpath: Path, every_n_train_steps: int):
        super().__init__(dirpath=dirpath, filename=LAST, save_last=True, save_top_k=0,
                         every_n_train_steps=every_n_train_steps, auto_insert_metric_name=False,
                         enable_version_counter=False)
        self.step_interval = every_n_train_steps

    @property
    def state_key(self) -> str:
        return "asr_pe.LastCheckpoint"  # independent of the interval: a changed interval still resumes

    def on_train_end(self, trainer, pl_module) -> None:
        # Lightning saves here only when no checkpoint was saved at all during the fit; the final
        # weights must be on disk whatever the interval (the batches of the steps after it follow
        # from the step alone, asr_pe.data.sampler.StepBatches).
        if trainer.global_step > 0 and trainer.global_step % self.step_interval:
            as_saved_at_batch_end(trainer)
            trainer.save_checkpoint(Path(self.dirpath) / f"{LAST}{CHECKPOINT_SUFFIX}")

    def state_dict(self) -> dict[str, Any]:
        return {}  # nothing to carry: the file name is fixed

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass


class BestCheckpoint(_RunCheckpoint):
    """``best.ckpt``: the lowest ``val/cer`` so far, also across resumes in a moved folder."""

    def __init__(self, dirpath: Path):
        super().__init__(dirpath=dirpath, filename=BEST, monitor=BEST_MONITOR, mode="min", save_top_k=1,
                         auto_insert_metric_name=False, enable_version_counter=False)

    @property
    def state_key(self) -> str:
        return "asr_pe.BestCheckpoint"

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        # checkpoints written before this callback existed keep the state under Lightning's key
        states = checkpoint.get("callbacks") or {}
        if self.state_key not in states:
            for key, state in list(states.items()):
                if key.startswith("ModelCheckpoint") and isinstance(state, dict) \
                        and state.get("monitor") == BEST_MONITOR and state.get("best_model_score") is not None:
                    states[self.state_key] = state
                    break

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # The saved paths name the folder the run was in then; the file is ours wherever it is now.
        here = str(Path(self.dirpath) / f"{BEST}{CHECKPOINT_SUFFIX}")
        score = state_dict.get("best_model_score")
        self.best_model_score = score
        self.best_model_path = here if score is not None else ""
        self.best_k_models = {here: score} if score is not None else {}
        self.kth_best_model_path = self.best_model_path
        self.kth_value = score if score is not None else self.kth_value
        self.current_score = state_dict.get("current_score")


class NonFiniteGuard(Callback):
    """Raises `TrainingDiverged` after the step that crosses a ``nonfinite`` limit."""

    def __init__(self, limits: Mapping[str, Any]):
        self.limits = dict(limits)
        self._seen = 0
        self._consecutive = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self._seen = int(pl_module.skipped_batches)  # a resumed run's count so far (a buffer in the checkpoint)
        self._consecutive = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        skipped = int(pl_module.skipped_batches)
        self._consecutive = self._consecutive + 1 if skipped > self._seen else 0
        self._seen = skipped
        reason = divergence(skipped, int(trainer.global_step), self._consecutive, self.limits)
        if reason:
            raise TrainingDiverged(f"training diverged: {reason}; stopped at step {trainer.global_step}, "
                                   "not evaluated, the run is not marked done (lower optim.lr, raise "
                                   "optim.warmup_steps, or set a nonfinite.* limit to null to go on)")


class SigtermStop(Callback):
    """A SIGTERM stops training at the same step on every rank, and that step is saved to ``path``.

    Lightning 2.6's own handling is rank-local: each rank raises its ``SIGTERMException`` after the
    batch during which the signal reached it, and rank 0's handler broadcasts from inside the signal
    handler, whatever collective the rank is in at that moment (Lightning-AI/pytorch-lightning#20806).
    Under DDP one rank then stopped a batch before the other, or met a broadcast where the other
    ran a gradient all-reduce, and both waited forever (the DDP stop test hung in 2 runs of 5 under
    load, and in every run when only rank 1 was signalled).

    Here Lightning's handler only notes the signal (`lightning_private.take_over_sigterm`; it still
    passes it on to the ranks its launcher started, and still calls the handlers it chains, SLURM's
    included), and the ranks agree whether any of them has it (one all-reduce) at points every rank
    reaches together: the end of each training batch, the end of each validation during training,
    and the end of training. Once they agree, Lightning's flag is set on every rank and Lightning
    raises after the batch and the validation it triggered, where every rank is; the flag is held
    back while a validation runs, so a validation is never cut short. Wherever the stop came, the resumed run goes on from the saved step
    (`asr_pe.data.sampler.StepBatches`). A signal after the last step's agreement ends the fit
    normally: `asr_pe.training.stops.fit_or_stop` reports it from `received`.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.saved_step: int | None = None
        self.noted = False    # this rank received the signal
        self.agreed = False   # the ranks agreed to stop

    @property
    def received(self) -> bool:
        return self.noted or self.agreed

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage != "fit":
            return
        self.noted = self.agreed = False
        launcher = trainer.strategy.launcher

        def note(signum, frame) -> None:
            log.info("rank %d: SIGTERM received; the ranks stop together after this batch", trainer.global_rank)
            if not self.noted and launcher is not None:
                launcher.kill(signum)  # the ranks this process started (DDP's launcher), as Lightning does
            self.noted = True

        take_over_sigterm(trainer, note)

    def _agree(self, trainer) -> None:
        if not self.agreed:  # every rank skips the collective together once they agreed
            self.agreed = trainer.strategy.reduce_boolean_decision(self.noted, all=False)
        set_sigterm_stop(trainer, self.agreed)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._agree(trainer)

    def on_validation_start(self, trainer, pl_module) -> None:
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking:
            set_sigterm_stop(trainer, False)  # Lightning's evaluation loop would stop after its first batch

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking:
            self._agree(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        self._agree(trainer)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if not isinstance(exception, SIGTERMException) or trainer.state.stage != RunningStage.TRAINING:
            return
        as_saved_at_batch_end(trainer)
        trainer.save_checkpoint(self.path)  # the loggers flushed first (_RunCheckpoint.on_save_checkpoint)
        self.saved_step = int(trainer.global_step)
        log.info("SIGTERM: saved step %d to %s", self.saved_step, self.path)


class StepRandomState(Callback):
    """The training steps draw from one random stream per rank, carried across stops in the checkpoint.

    A step's dropout and CAPE draws come from torch's global state (SpecAugment's masks do not:
    each item has its own seed, `asr_pe.data.sampler.augment_seed`). Between two steps other code
    draws from that state too: a loader creating its iterator at an epoch's start or for a
    validation takes a seed from it. A resumed run does those at other moments, so its steps would
    draw other masks. Here each step starts from the state the previous step ended in, whatever
    ran between, and the checkpoint holds that state for every rank (each rank's differs: its
    batches' shapes decide how much it draws). A resume with another number of ranks starts from
    the global state, as a new run does, and says so.
    """

    def __init__(self):
        self._state: dict[str, torch.Tensor] | None = None  # after the last step; None before the first

    @property
    def state_key(self) -> str:
        return "asr_pe.StepRandomState"

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._state is not None:
            torch.set_rng_state(self._state["cpu"])
            if "cuda" in self._state and torch.cuda.is_available():
                torch.cuda.set_rng_state(self._state["cuda"])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._state = {"cpu": torch.get_rng_state()}
        if pl_module.device.type == "cuda":
            self._state["cuda"] = torch.cuda.get_rng_state()

    @staticmethod
    def _world() -> int:
        dist = torch.distributed
        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1

    def state_dict(self) -> dict[str, Any]:
        # every rank saves (Lightning dumps the checkpoint on all ranks; rank 0 writes it)
        if self._state is None:
            return {}
        ranks: list[Any] = [self._state] * self._world()
        if len(ranks) > 1:
            torch.distributed.all_gather_object(ranks, self._state)  # each rank's own state in its place
        return {"ranks": ranks}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ranks = state_dict.get("ranks") or []
        world = self._world()
        if len(ranks) != world:
            log.warning("the checkpoint holds the random state of %d rank(s), this run has %d: the resumed "
                        "steps draw other dropout masks than an uninterrupted run would", len(ranks), world)
            return
        self._state = ranks[torch.distributed.get_rank() if world > 1 else 0]


class ApplyOptimSettings(Callback):
    """A resumed run trains with the optimiser settings of its config, not those of its checkpoint.
    
    Lightning restores the optimiser's and the LR scheduler's state dicts after the model: the peak
    learning rate (the scheduler's ``base_lrs``, each group's ``initial_lr``), the current ``lr``,
    ``weight_decay``, ``betas`` and ``eps`` all come back from the checkpoint, so ``optim.lr=...`` on a
    resume changed ``config.yaml`` but not the training. The schedule's shape (kind, warm-up, total
    steps) is a function in the module and always follows the config. This callback rewrites the
    loaded state (callbacks see the checkpoint before the optimiser is restored) to the config's
    values, and sets the current ``lr`` to where the schedule stands at the restored step, so the
    config written for the run is the one it trains with.
    """

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        o = pl_module.optim_cfg
        lr = float(o["lr"])
        decay = float(o.get("weight_decay", 0.01))
        betas = tuple(float(b) for b in o.get("betas", (0.9, 0.98)))
        eps = float(o.get("eps", 1e-9))
        schedulers = checkpoint.get("lr_schedulers") or []
        step = int(schedulers[0].get("last_epoch", 0)) if schedulers else int(checkpoint.get("global_step", 0))
        now = lr * pl_module.lr_scale(step)
        for state in checkpoint.get("optimizer_states") or []:
            # the groups as configure_optimizers builds them: decayed parameters, then the others
            for i, group in enumerate(state.get("param_groups", [])):
                group.update(lr=now, initial_lr=lr, betas=betas, eps=eps, weight_decay=decay if i == 0 else 0.0)
        for sched in schedulers:
            n = len(sched.get("base_lrs") or [])
            sched["base_lrs"] = [lr] * n
            sched["_last_lr"] = [now] * n
