"""LightningModule: losses (CTC, seq2seq, hybrid), optimiser and schedule, validation CER/WER."""

from __future__ import annotations

import logging
from typing import Any, Mapping

import lightning as L
import torch

from asr_pe.decoding.ctc import ctc_greedy
from asr_pe.evaluation.scoring import score_utterance
from asr_pe.models.asr import ASRModel
from asr_pe.models.losses import LabelSmoothingLoss, add_sos_eos, ctc_loss, hybrid_loss

from .schedules import lr_multiplier

log = logging.getLogger(__name__)


class ASRModule(L.LightningModule):
    """Wraps an `ASRModel`. ``loss_cfg``: {name, ctc_weight, label_smoothing};
    ``optim_cfg``: {lr, weight_decay, betas, schedule, warmup_steps, min_lr_ratio}."""

    def __init__(self, model: ASRModel, tokenizer: Any, loss_cfg: Mapping[str, Any],
                 optim_cfg: Mapping[str, Any], total_steps: int | None = None):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.loss_cfg = dict(loss_cfg)
        self.optim_cfg = dict(optim_cfg)
        self.total_steps = total_steps
        self.ctc_weight = float(self.loss_cfg.get("ctc_weight", 1.0))
        assert 0.0 <= self.ctc_weight <= 1.0, f"loss.ctc_weight must be in [0, 1], got {self.ctc_weight}"
        if self.ctc_weight < 1.0:
            assert model.decoder is not None, f"loss={self.loss_cfg.get('name')} needs an attention decoder"
            self.att_loss = LabelSmoothingLoss(
                model.vocab_size, padding_idx=-1, smoothing=float(self.loss_cfg.get("label_smoothing", 0.1))
            )
        # counters that survive checkpoints (buffers are saved in the state dict)
        self.register_buffer("skipped_batches", torch.zeros((), dtype=torch.long), persistent=True)
        self.register_buffer("dropped_utterances", torch.zeros((), dtype=torch.long), persistent=True)
        self._val: list[dict] = []

    # ------------------------------------------------------------------ losses
    def compute_loss(self, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        enc, enc_lengths = self.model.encode(batch["features"], batch["feature_lengths"])
        parts: dict[str, torch.Tensor] = {}
        ctc = att = None
        if self.ctc_weight > 0:
            log_probs = self.model.ctc_log_probs(enc)
            ctc, finite = ctc_loss(log_probs, enc_lengths, batch["tokens"], batch["token_lengths"],
                                   blank=self.tokenizer.blank_id)
            n_bad = int((~finite).sum())
            if n_bad:
                self.dropped_utterances += n_bad
            parts["ctc"] = ctc.detach()
        if self.ctc_weight < 1:
            dec_in, dec_target = add_sos_eos(batch["tokens"], self.tokenizer.sos_id, self.tokenizer.eos_id)
            logits = self.model.decoder(dec_in, batch["token_lengths"] + 1, enc, enc_lengths)  # (B, U+1, V)
            att = self.att_loss(logits, dec_target)
            parts["att"] = att.detach()
            with torch.no_grad():
                mask = dec_target != -1
                parts["acc"] = ((logits.argmax(-1) == dec_target) & mask).sum() / mask.sum().clamp(min=1)
        return hybrid_loss(ctc, att, self.ctc_weight), parts

    def training_step(self, batch: dict, batch_idx: int):
        loss, parts = self.compute_loss(batch)
        if not torch.isfinite(loss):
            # Skipping (returning None) leaves the weights untouched; the count is logged.
            self.skipped_batches += 1
            log.warning("non-finite loss at step %d (batch of %s); skipped", self.global_step, batch["ids"][:3])
            self.log("train/skipped_batches", self.skipped_batches.float(), on_step=True)
            return None
        bs = len(batch["ids"])
        self.log("train/loss", loss.detach(), prog_bar=True, on_step=True, batch_size=bs)
        for k, v in parts.items():
            self.log(f"train/{k}", v, on_step=True, batch_size=bs)
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], on_step=True, prog_bar=False)
        self.log("train/dropped_utterances", self.dropped_utterances.float(), on_step=True)
        return loss

    # ---------------------------------------------------------------- validation
    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, parts = self.compute_loss(batch)
        bs = len(batch["ids"])
        if torch.isfinite(loss):
            self.log("val/loss", loss, prog_bar=True, batch_size=bs, sync_dist=True)
        if "acc" in parts:
            self.log("val/acc", parts["acc"], batch_size=bs, sync_dist=True)
        enc, enc_lengths = self.model.encode(batch["features"], batch["feature_lengths"])
        if self.ctc_weight > 0:
            hyps = ctc_greedy(self.model.ctc_log_probs(enc), enc_lengths, blank=self.tokenizer.blank_id)
        else:  # seq2seq: greedy attention decoding (beam 1)
            from asr_pe.decoding.attention import attention_decode

            hyps = attention_decode(self.model, enc, enc_lengths, self.tokenizer,
                                    {"method": "attention", "beam": 1, "length_penalty": 1.0, "max_len_ratio": 1.0})
        for ref, hyp in zip(batch["texts"], hyps):
            self._val.append(score_utterance(ref, self.tokenizer.decode(hyp)))

    def on_validation_epoch_end(self) -> None:
        if not self._val:
            return
        errs = sum(r["errors"] for r in self._val)
        words = sum(r["ref_words"] for r in self._val)
        cerrs = sum(r["char_errors"] for r in self._val)
        chars = sum(r["ref_chars"] for r in self._val)
        self.log("val/wer", 100.0 * errs / max(words, 1), prog_bar=True, sync_dist=True)
        self.log("val/cer", 100.0 * cerrs / max(chars, 1), prog_bar=True, sync_dist=True)
        self._val.clear()

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
        kind, warm = o.get("schedule", "noam"), int(o.get("warmup_steps", 1000))
        total, min_ratio = self.total_steps, float(o.get("min_lr_ratio", 0.0))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: lr_multiplier(s, kind=kind, warmup_steps=warm, total_steps=total, min_ratio=min_ratio)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
