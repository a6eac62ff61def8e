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

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback

from .schedules import lr_multiplier


class ApplyOptimSettings(Callback):
    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        o = pl_module.optim_cfg
        lr = float(o["lr"])
        decay = float(o.get("weight_decay", 0.01))
        betas = tuple(float(b) for b in o.get("betas", (0.9, 0.98)))
        eps = float(o.get("eps", 1e-9))
        schedulers = checkpoint.get("lr_schedulers") or []
        step = int(schedulers[0].get("last_epoch", 0)) if schedulers else int(checkpoint.get("global_step", 0))
        now = lr * lr_multiplier(step, kind=o.get("schedule", "noam"), warmup_steps=int(o.get("warmup_steps", 1000)),
                                 total_steps=pl_module.total_steps, min_ratio=float(o.get("min_lr_ratio", 0.0)))
        for state in checkpoint.get("optimizer_states") or []:
            # the groups as configure_optimizers builds them: decayed parameters, then the others
            for i, group in enumerate(state.get("param_groups", [])):
                group.update(lr=now, initial_lr=lr, betas=betas, eps=eps, weight_decay=decay if i == 0 else 0.0)
        for sched in schedulers:
            n = len(sched.get("base_lrs") or [])
            sched["base_lrs"] = [lr] * n
            sched["_last_lr"] = [now] * n
