"""Run by test_ddp.py as ``python ddp_probe.py <run_dir> <synth root> <nan rank> <nan step>``.

Trains the tiny model under ``trainer=ddp`` on 2 CPU processes (Lightning's launcher starts the
second by running this script again) with a NaN loss injected on one rank at one step, and has
each rank write what it saw to ``<run_dir>/probe_rank<r>.json``: the utterances of its training
and validation batches, the steps it skipped, its validation sums and a checksum of its weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides  # noqa: E402

from asr_pe.training.module import ASRModule  # noqa: E402
from asr_pe.training.train import train  # noqa: E402


def main() -> None:
    run_dir, root, nan_rank, nan_step = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seen = {"train": [], "val": [], "skipped_steps": [], "val_sums": []}
    compute_loss, training_step = ASRModule.compute_loss, ASRModule.training_step
    validation_step, val_end = ASRModule.validation_step, ASRModule.on_validation_epoch_end

    def nan_compute_loss(self, batch):
        loss, parts = compute_loss(self, batch)
        if self.training and self.global_rank == nan_rank and self.global_step == nan_step:
            loss = loss * float("nan")
        return loss, parts

    def recording_training_step(self, batch, batch_idx):
        seen["train"].append([int(self.global_step), list(batch["ids"])])
        out = training_step(self, batch, batch_idx)
        if self._skip_step:
            seen["skipped_steps"].append(int(self.global_step))
        return out

    def recording_validation_step(self, batch, batch_idx, dataloader_idx=0):
        if not self._is_padding(batch_idx, dataloader_idx):
            seen["val"].extend(batch["ids"])
        return validation_step(self, batch, batch_idx, dataloader_idx)

    def recording_val_end(self):
        seen["val_sums"].append(self._val_sums.tolist())
        return val_end(self)

    ASRModule.compute_loss = nan_compute_loss
    ASRModule.training_step = recording_training_step
    ASRModule.validation_step = recording_validation_step
    ASRModule.on_validation_epoch_end = recording_val_end
    weights = {}
    fit = ASRModule.on_train_end

    def on_train_end(self):
        weights["sum"] = float(sum(p.detach().double().sum() for p in self.parameters()))
        weights["rank"] = int(self.global_rank)
        return fit(self)

    ASRModule.on_train_end = on_train_end
    cfg = compose_train(TINY_MODEL + synth_overrides(root) + [
        f"run_dir={run_dir}", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
        "trainer.precision=32-true", "trainer.max_steps=6", "pe=rope", "encoder=transformer",
        "data.num_workers=0", "data.spec_augment=null", "checkpoint.every_n_train_steps=3",
        "+trainer.val_check_interval=3", "trainer.check_val_every_n_epoch=null", "eval.n_boot=20",
    ])
    train(cfg)
    (run_dir / f"probe_rank{weights['rank']}.json").write_text(json.dumps({**seen, "weight_sum": weights["sum"]}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
