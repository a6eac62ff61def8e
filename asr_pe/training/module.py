"""LightningModule: losses (CTC, seq2seq, hybrid, transducer, hybrid_transducer), optimiser and schedule, validation CER/WER.

Distributed data parallel: every collective must be issued by every rank in the same order, so
nothing here depends on one rank's data alone. A non-finite training loss on any rank skips the
step on all ranks (the ranks agree through an all-gather of a flag every step; see
`training_step`); validation sums
errors, reference words/characters and losses on each rank and all-reduces the sums once at the
end of the epoch (a corpus-level WER, not a mean of per-rank ratios), leaving out the batches
the bucket sampler repeated onto a rank to even out the batch count.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import lightning as L
import torch

from asr_pe.decoding.ctc import ctc_greedy
from asr_pe.data.sampler import DurationBucketSampler
from asr_pe.evaluation.scoring import score_utterance
from asr_pe.models.asr import ASRModel
from asr_pe.models.asr import second_head
from asr_pe.models.losses import LabelSmoothingLoss, add_sos_eos, ctc_loss, hybrid_loss, transducer_loss

from .schedules import lr_multiplier

log = logging.getLogger(__name__)


# Per-rank validation sums, all-reduced at the end of the epoch.
# (``self.trainer`` is never None in a hook: Lightning's property raises when no trainer is attached.)
VAL_SUMS = ("errors", "ref_words", "char_errors", "ref_chars", "loss", "loss_weight", "acc_correct", "acc_total")


class ASRModule(L.LightningModule):
    """Wraps an `ASRModel`. ``loss_cfg``: {name, ctc_weight, label_smoothing | transducer};
    ``optim_cfg``: {lr, weight_decay, betas, schedule, warmup_steps, min_lr_ratio}."""

    def __init__(self, model: ASRModel, tokenizer: Any, loss_cfg: Mapping[str, Any],
                 optim_cfg: Mapping[str, Any], total_steps: int | None = None,
                 batches_per_epoch: int | None = None):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.loss_cfg = dict(loss_cfg)
        self.optim_cfg = dict(optim_cfg)
        self.total_steps = total_steps
        self.batches_per_epoch = batches_per_epoch  # one rank's, for the logs' epoch column
        self.ctc_weight = float(self.loss_cfg.get("ctc_weight", 1.0))
        assert 0.0 <= self.ctc_weight <= 1.0, f"loss.ctc_weight must be in [0, 1], got {self.ctc_weight}"
        self.second = second_head(self.loss_cfg)
        if self.second == "transducer":
            assert model.transducer is not None, f"loss={self.loss_cfg.get('name')} needs a transducer head"
        elif self.ctc_weight < 1.0:
            assert model.decoder is not None, f"loss={self.loss_cfg.get('name')} needs an attention decoder"
            self.att_loss = LabelSmoothingLoss(
                model.vocab_size, padding_idx=-1, smoothing=float(self.loss_cfg.get("label_smoothing", 0.1))
            )
        # counters that survive checkpoints (buffers are saved in the state dict)
        self.register_buffer("skipped_batches", torch.zeros((), dtype=torch.long), persistent=True)
        self.register_buffer("dropped_utterances", torch.zeros((), dtype=torch.long), persistent=True)
        self._val_sums = torch.zeros(len(VAL_SUMS), dtype=torch.float64)
        self._skip_step = False  # set by training_step, consumed before the optimiser step

    # ------------------------------------------------------------------ losses
    def compute_loss(self, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        enc, enc_lengths = self.model.encode(batch["features"], batch["feature_lengths"])
        parts: dict[str, torch.Tensor] = {}
        ctc = att = None
        if self.ctc_weight > 0:
            log_probs = self.model.ctc_log_probs(enc)
            ctc, finite = ctc_loss(log_probs, enc_lengths, batch["tokens"], batch["token_lengths"],
                                   blank=self.tokenizer.blank_id)
            self.dropped_utterances += int((~finite).sum())
            parts["ctc"] = ctc.detach()
        if self.second == "transducer":
            # the second head's loss in the place of the attention loss: λ·CTC + (1 − λ)·transducer
            att, finite = transducer_loss(self.model.transducer, enc, enc_lengths, batch["tokens"],
                                          batch["token_lengths"])
            self.dropped_utterances += int((~finite).sum())
            parts["transducer"] = att.detach()
        elif self.ctc_weight < 1:
            dec_in, dec_target = add_sos_eos(batch["tokens"], self.tokenizer.sos_id, self.tokenizer.eos_id)
            logits = self.model.decoder(dec_in, batch["token_lengths"] + 1, enc, enc_lengths)  # (B, U+1, V)
            att = self.att_loss(logits, dec_target)
            parts["att"] = att.detach()
            with torch.no_grad():
                mask = dec_target != -1
                parts["acc_correct"] = ((logits.argmax(-1) == dec_target) & mask).sum()
                parts["acc_total"] = mask.sum()
                parts["acc"] = parts["acc_correct"] / parts["acc_total"].clamp(min=1)
        return hybrid_loss(ctc, att, self.ctc_weight), parts

    def _any_rank(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on any (one all-gather; no-op on one process)."""
        if self.trainer.world_size == 1:
            return flag
        return bool(self.all_gather(torch.tensor(flag, device=self.device)).any())

    def _log_data_epoch(self, batches: int) -> None:
        """The logs' ``epoch`` column: the epoch of the data after ``batches`` training batches. The
        trainer sees one endless epoch (`asr_pe.data.sampler.StepBatches`), so its own count would
        say 0 throughout."""
        if not self.batches_per_epoch:
            return
        epoch = float(batches // self.batches_per_epoch)
        if self.trainer.training:
            self.log("epoch", epoch, on_step=True, on_epoch=False)
        else:
            self.log("epoch", epoch, sync_dist=True)  # equal on every rank

    def training_step(self, batch: dict, batch_idx: int):
        accumulate = self.trainer.accumulate_grad_batches
        self._log_data_epoch(self.global_step * accumulate + batch_idx % accumulate)  # this batch's position
        loss, parts = self.compute_loss(batch)
        finite_here = bool(torch.isfinite(loss))
        if self._any_rank(not finite_here):
            # Skip the step on every rank alike. Lightning refuses a None return under DDP, and a
            # backward must run on every rank for the gradient all-reduce, so the loss becomes an
            # exact zero over every parameter; `on_before_optimizer_step` then drops the (zero)
            # gradients, and AdamW leaves parameters without a gradient (and their state) untouched.
            self._skip_step = True
            self.skipped_batches += 1
            where = "here" if not finite_here else "on another rank"
            log.warning("non-finite loss %s at step %d (batch of %s); step skipped on every rank",
                        where, self.global_step, batch["ids"][:3])
            self.log("train/skipped_batches", self.skipped_batches.float(), on_step=True)
            return sum(p.sum() for p in self.parameters() if p.requires_grad) * 0.0
        bs = len(batch["ids"])
        self.log("train/loss", loss.detach(), prog_bar=True, on_step=True, batch_size=bs)
        for k, v in parts.items():
            if k in ("acc_correct", "acc_total"):
                continue
            self.log(f"train/{k}", v, on_step=True, batch_size=bs)
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], on_step=True, prog_bar=False)
        self.log("train/dropped_utterances", self.dropped_utterances.float(), on_step=True)
        return loss

    def on_before_optimizer_step(self, optimizer) -> None:
        if self._skip_step:
            optimizer.zero_grad(set_to_none=True)
            self._skip_step = False

    # ---------------------------------------------------------------- validation
    def _is_padding(self, batch_idx: int, dataloader_idx: int = 0) -> bool:
        """Whether this validation batch is one the sampler repeated to even out the ranks."""
        loaders = self.trainer.val_dataloaders
        if isinstance(loaders, (list, tuple)):
            loaders = loaders[dataloader_idx]
        sampler = getattr(loaders, "batch_sampler", None)
        return isinstance(sampler, DurationBucketSampler) and sampler.is_padding(batch_idx)

    def validation_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        # A padding batch still runs the model (DDP may sync buffers in every forward) but is not scored.
        loss, parts = self.compute_loss(batch)
        if self._is_padding(batch_idx, dataloader_idx):
            return
        bs = len(batch["ids"])
        sums = {}
        if torch.isfinite(loss):
            sums["loss"], sums["loss_weight"] = float(loss) * bs, bs
        if "acc_total" in parts:
            sums["acc_correct"], sums["acc_total"] = float(parts["acc_correct"]), float(parts["acc_total"])
        enc, enc_lengths = self.model.encode(batch["features"], batch["feature_lengths"])
        if self.second == "transducer":  # the transducer is the head that is decoded (CTC is its helper)
            from asr_pe.decoding.transducer import transducer_greedy

            hyps = transducer_greedy(self.model.transducer, enc, enc_lengths)
        elif self.ctc_weight > 0:
            hyps = ctc_greedy(self.model.ctc_log_probs(enc), enc_lengths, blank=self.tokenizer.blank_id)
        else:  # seq2seq: greedy attention decoding (beam 1)
            from asr_pe.decoding.attention_decoding import attention_decode

            hyps = attention_decode(self.model, enc, enc_lengths, self.tokenizer,
                                    {"method": "attention", "beam": 1, "length_penalty": 1.0, "max_len_ratio": 1.0})
        for ref, hyp in zip(batch["texts"], hyps):
            r = score_utterance(ref, self.tokenizer.decode(hyp))
            for k in ("errors", "ref_words", "char_errors", "ref_chars"):
                sums[k] = sums.get(k, 0) + r[k]
        for k, v in sums.items():
            self._val_sums[VAL_SUMS.index(k)] += v

    def on_validation_epoch_end(self) -> None:
        # Every rank gets here and reduces, including one whose batches were all padding.
        sums = self._val_sums.to(self.device)
        if self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        total = dict(zip(VAL_SUMS, sums.tolist()))
        self._val_sums.zero_()
        if total["ref_words"] == 0:
            return  # no validation data at all (the same on every rank)
        if self.trainer.state.fn == "fit":
            # a validation during training: the epoch of the last batch trained
            self._log_data_epoch(max(self.global_step * self.trainer.accumulate_grad_batches - 1, 0))
        # The values are global already and equal on every rank; sync_dist (a mean of equal values)
        # only keeps Lightning from warning about unsynced epoch-level metrics.
        metrics = {"val/wer": 100.0 * total["errors"] / total["ref_words"],
                   "val/cer": 100.0 * total["char_errors"] / max(total["ref_chars"], 1)}
        if total["loss_weight"] > 0:
            metrics["val/loss"] = total["loss"] / total["loss_weight"]
        if total["acc_total"] > 0:
            metrics["val/acc"] = total["acc_correct"] / total["acc_total"]
        for name, value in metrics.items():
            self.log(name, value, prog_bar=name != "val/acc", sync_dist=True)

    # ---------------------------------------------------------------- optimiser
    def configure_optimizers(self):
        o = self.optim_cfg
        decay, no_decay = [], []
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            # biases, norms and PE tables/scalars are not decayed
            (no_decay if p.ndim < 2 or "norm" in name or ".pe." in name else decay).append(p)
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": o.get("weight_decay", 0.01)},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=o["lr"], betas=tuple(o.get("betas", (0.9, 0.98))), eps=o.get("eps", 1e-9),
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: self.lr_scale(step))  # a lambda: not saved
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def lr_scale(self, step: int) -> float:
        """The schedule's multiplier of the peak learning rate at ``step``, as the config says (also
        where a resumed run's restored optimiser is set, `asr_pe.training.callbacks.ApplyOptimSettings`)."""
        o = self.optim_cfg
        return lr_multiplier(step, kind=o.get("schedule", "noam"), warmup_steps=int(o.get("warmup_steps", 1000)),
                             total_steps=self.total_steps, min_ratio=float(o.get("min_lr_ratio", 0.0)))


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
