"""Training losses: CTC, label-smoothed attention loss, the hybrid CTC/attention mix, and the
transducer (RNN-T) loss with its memory budget.

Token tensors follow the collate contract: (B, U) int64 padded with -1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ctc_loss", "LabelSmoothingLoss", "add_sos_eos", "hybrid_loss", "CTC_REDUCTIONS", "transducer_loss",
           "lattice_bytes", "lattice_chunks"]

CTC_REDUCTIONS = ("mean_per_utt", "sum", "mean_per_token", "none")


def _check_targets(targets: torch.Tensor, target_lengths: torch.Tensor, vocab: int, blank: int) -> None:
    if targets.dim() != 2:
        raise ValueError(f"targets must be (B, U) padded with -1, got shape {tuple(targets.shape)}")
    if target_lengths.shape != (targets.shape[0],):
        raise ValueError(f"target_lengths must have shape ({targets.shape[0]},), got {tuple(target_lengths.shape)}")
    if int(target_lengths.min()) < 0 or int(target_lengths.max()) > targets.shape[1]:
        raise ValueError(f"target_lengths must lie in [0, {targets.shape[1]}], got {target_lengths.tolist()}")
    valid = torch.arange(targets.shape[1], device=targets.device)[None, :] < target_lengths[:, None]  # (B, U)
    labels = targets[valid]
    if labels.numel():
        bad = (labels < 0) | (labels >= vocab) | (labels == blank)
        if bad.any():
            raise ValueError(
                f"CTC targets must be labels in [0, {vocab}) other than blank={blank} within target_lengths; "
                f"found {sorted(set(labels[bad].tolist()))[:10]}"
            )


def ctc_loss(
    log_probs: torch.Tensor,
    lengths: torch.Tensor,
    targets: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "mean_per_utt",
) -> tuple[torch.Tensor, torch.Tensor]:
    """CTC negative log-likelihood with a per-utterance finiteness mask.

    ``F.ctc_loss`` runs with ``zero_infinity=False``: an utterance whose transcript cannot be
    aligned (more labels plus required blanks between repeats than frames) has an infinite
    loss and NaN gradients. Such utterances are left out of the reduction, by recomputing the
    loss on the finite ones only (so no NaN reaches the gradients), and reported in the mask
    so the trainer can count or log them; ``zero_infinity=True`` would hide them as zeros.

    Args:
        log_probs: (B, T, V) log-softmax outputs.
        lengths: (B,) valid frames.
        targets: (B, U) labels padded with -1.
        target_lengths: (B,) labels per utterance.
        blank: CTC blank index.
        reduction: ``mean_per_utt`` (sum over finite utterances / their count, as ESPnet),
            ``sum``, ``mean_per_token`` (sum / labels of the finite utterances; not torch's
            "mean", which averages per-utterance losses divided by their lengths), or
            ``none`` (the (B,) losses, inf where infeasible, no masking).
    Returns:
        (loss, finite) where finite is a (B,) bool mask of utterances with a finite loss.
        With no finite utterance the loss is a zero that still depends on log_probs.
    """
    if reduction not in CTC_REDUCTIONS:
        raise ValueError(f"reduction must be one of {CTC_REDUCTIONS}, got {reduction!r}")
    if log_probs.dim() != 3:
        raise ValueError(f"log_probs must be (B, T, V), got shape {tuple(log_probs.shape)}")
    batch, frames, vocab = log_probs.shape
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=log_probs.device)
    target_lengths = torch.as_tensor(target_lengths, dtype=torch.long, device=log_probs.device)
    targets = torch.as_tensor(targets, dtype=torch.long, device=log_probs.device)
    if lengths.shape != (batch,):
        raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}")
    if int(lengths.min()) < 0 or int(lengths.max()) > frames:
        raise ValueError(f"lengths must lie in [0, {frames}], got {lengths.tolist()}")
    if targets.shape[0] != batch:
        raise ValueError(f"targets have batch size {targets.shape[0]}, log_probs {batch}")
    _check_targets(targets, target_lengths, vocab, blank)

    def per_utterance(index: torch.Tensor | None) -> torch.Tensor:
        lp, ln, tg, tl = log_probs, lengths, targets, target_lengths
        if index is not None:
            lp, ln, tg, tl = lp[index], ln[index], tg[index], tl[index]
        tg = tg.clamp(min=0)  # padding (-1) past target_lengths is ignored; keep it a valid index
        return F.ctc_loss(
            (lp if lp.dtype in (torch.float32, torch.float64) else lp.float()).transpose(0, 1),  # (T, B, V)
            tg,
            ln,
            tl,
            blank=blank,
            reduction="none",
            zero_infinity=False,
        )  # (B,)

    losses = per_utterance(None)
    finite = torch.isfinite(losses)
    if reduction == "none":
        return losses, finite
    if not bool(finite.all()):
        index = torch.nonzero(finite).flatten()
        if index.numel() == 0:
            return log_probs.sum() * 0.0, finite
        losses = per_utterance(index)
    if reduction == "sum":
        loss = losses.sum()
    elif reduction == "mean_per_utt":
        loss = losses.sum() / losses.numel()
    else:
        loss = losses.sum() / target_lengths[finite].sum().clamp(min=1)
    return loss, finite


class LabelSmoothingLoss(nn.Module):
    """Label-smoothed attention loss: KL(q || p) as in ESPnet's ``LabelSmoothingLoss``.

    The smoothed target q puts 1 - smoothing on the reference token and smoothing / (V - 1)
    on each other token (torch's ``label_smoothing`` instead spreads smoothing / V over all
    tokens, the reference included). KL(q || p) = CE(q, p) - H(q) differs from the smoothed
    cross entropy by a constant, so gradients are the same, and it is 0 for p = q. With
    smoothing = 0 it equals cross entropy. Padding positions are ignored.

    Args:
        vocab_size: V.
        padding_idx: target value marking padding (-1 in this package).
        smoothing: probability mass moved off the reference token.
        normalize_length: divide by the number of non-padding tokens (True) or by the batch
            size (False, ESPnet's default, a per-utterance sum).
    forward(logits (B, U, V) pre-softmax, target (B, U)) -> scalar.
    """

    def __init__(self, vocab_size: int, padding_idx: int = -1, smoothing: float = 0.1, normalize_length: bool = False):
        super().__init__()
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must lie in [0, 1), got {smoothing}")
        self.vocab_size = vocab_size
        self.padding_idx = padding_idx
        self.smoothing = smoothing
        self.confidence = 1.0 - smoothing
        self.normalize_length = normalize_length

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(f"logits have {logits.shape[-1]} classes, expected vocab_size={self.vocab_size}")
        if logits.shape[:-1] != target.shape:
            raise ValueError(f"logits {tuple(logits.shape)} and target {tuple(target.shape)} do not match")
        batch = logits.shape[0]
        logits = logits.reshape(-1, self.vocab_size)  # (B*U, V)
        target = target.reshape(-1)  # (B*U,)
        ignore = target == self.padding_idx
        labels = target.masked_fill(ignore, 0)
        if bool(((labels < 0) | (labels >= self.vocab_size)).any()):
            raise ValueError(f"target ids must lie in [0, {self.vocab_size}) or equal padding_idx={self.padding_idx}")
        log_p = torch.log_softmax(logits.float(), dim=-1)  # (B*U, V)
        true_dist = torch.full_like(log_p, self.smoothing / (self.vocab_size - 1))
        true_dist.scatter_(1, labels[:, None], self.confidence)
        kl = F.kl_div(log_p, true_dist, reduction="none")  # q log q - q log p; 0 where q = 0
        kl = kl.masked_fill(ignore[:, None], 0.0).sum()
        denom = int((~ignore).sum()) if self.normalize_length else batch
        return kl / max(denom, 1)


def add_sos_eos(
    targets: torch.Tensor, sos: int, eos: int, pad: int = -1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder input [sos, y] and target [y, eos] from (B, U) labels padded with ``pad``.

    Returns (decoder_in, decoder_target), both (B, U + 1). The input is padded with eos (a
    valid embedding index; those positions are masked by length), the target with ``pad`` so
    the loss ignores it, as in ESPnet.
    """
    if targets.dim() != 2:
        raise ValueError(f"targets must be (B, U), got shape {tuple(targets.shape)}")
    batch, width = targets.shape
    valid = targets != pad  # (B, U)
    lengths = valid.sum(dim=1)  # (B,)
    positions = torch.arange(width, device=targets.device)[None, :]  # (1, U)
    if not bool((valid == (positions < lengths[:, None])).all()):
        raise ValueError("targets must hold their labels first and padding only at the end of each row")
    positions1 = torch.arange(width + 1, device=targets.device)[None, :]  # (1, U + 1)
    decoder_in = torch.full((batch, width + 1), eos, dtype=targets.dtype, device=targets.device)
    decoder_in[:, 0] = sos
    decoder_in[:, 1:] = torch.where(valid, targets, torch.full_like(targets, eos))
    decoder_target = torch.full((batch, width + 1), pad, dtype=targets.dtype, device=targets.device)
    decoder_target[:, :width] = torch.where(valid, targets, torch.full_like(targets, pad))
    decoder_target = torch.where(positions1 == lengths[:, None], torch.full_like(decoder_target, eos), decoder_target)
    return decoder_in, decoder_target


def hybrid_loss(ctc: torch.Tensor | None, att: torch.Tensor | None, ctc_weight: float = 0.3) -> torch.Tensor:
    """lambda * ctc + (1 - lambda) * att (Watanabe et al. 2017 multi-task objective).

    At lambda = 0 or 1 the unused loss may be None and is not touched (a NaN there does not
    leak through 0 * NaN).
    """
    if not 0.0 <= ctc_weight <= 1.0:
        raise ValueError(f"ctc_weight must lie in [0, 1], got {ctc_weight}")
    if ctc_weight == 0.0:
        if att is None:
            raise ValueError("ctc_weight = 0 needs the attention loss")
        return att
    if ctc_weight == 1.0:
        if ctc is None:
            raise ValueError("ctc_weight = 1 needs the CTC loss")
        return ctc
    if ctc is None or att is None:
        raise ValueError(f"ctc_weight = {ctc_weight} needs both the CTC and the attention loss")
    return ctc_weight * ctc + (1.0 - ctc_weight) * att


# ---------------------------------------------------------------------------------- transducer


def lattice_bytes(frames: int, labels: int, joiner_dim: int, vocab: int) -> int:
    """Estimated training memory of one utterance's joiner and loss lattice, (T, U+1) nodes:
    the joiner's sum and tanh (2·J floats a node), the logits, their fp32 copy and the loss's
    gradient (3·V), 4 bytes each. docs/benchmarks.md compares it with measured peaks."""
    return int(frames) * (int(labels) + 1) * (2 * int(joiner_dim) + 3 * int(vocab)) * 4


def lattice_chunks(frames: list[int], labels: list[int], joiner_dim: int, vocab: int,
                   budget_bytes: float | None) -> list[tuple[int, int]]:
    """Split a batch (in its order) into runs [s, e) whose padded lattice, n · max T · (max U + 1)
    nodes, stays within ``budget_bytes``; one utterance over the budget is a run of its own.
    None: the whole batch is one run."""
    n = len(frames)
    if budget_bytes is None or n == 0:
        return [(0, n)]
    runs, start, max_t, max_u = [], 0, 0, 0
    for i in range(n):
        t, u = max(max_t, frames[i]), max(max_u, labels[i])
        if i > start and (i - start + 1) * lattice_bytes(t, u, joiner_dim, vocab) > budget_bytes:
            runs.append((start, i))
            start, t, u = i, frames[i], labels[i]
        max_t, max_u = t, u
    runs.append((start, n))
    return runs


def _rnnt_losses(head, enc_proj: torch.Tensor, pred_proj: torch.Tensor, targets: torch.Tensor,
                 frames: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B,) negative log-likelihoods of one run, cropped to its longest utterance and label
    sequence. The joiner may run under autocast; the loss always runs in fp32."""
    from torchaudio.functional import rnnt_loss  # torchaudio is a dependency; imported where used

    t_max, u_max = int(frames.max()), int(labels.max())
    logits = head.joiner(enc_proj[:, :t_max, None, :], pred_proj[:, None, : u_max + 1, :])  # (B, T, U+1, V)
    with torch.autocast(device_type=logits.device.type, enabled=False):
        return rnnt_loss(logits.float(), targets[:, :u_max].clamp(min=0).int().contiguous(), frames.int(),
                         labels.int(), blank=head.blank, reduction="none", fused_log_softmax=True)


def transducer_loss(
    head,
    enc: torch.Tensor,
    lengths: torch.Tensor,
    targets: torch.Tensor,
    target_lengths: torch.Tensor,
    reduction: str = "mean_per_utt",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Transducer negative log-likelihood -log Σ_alignments p (Graves 2012) with
    ``torchaudio.functional.rnnt_loss`` over the joiner's (B, T, U+1, V) logits.

    Memory: the lattice is the cost (B·T·(U+1)·V logits and as much gradient). With
    ``head.lattice_budget_mb`` set, a batch whose padded lattice (`lattice_bytes`) exceeds it is
    split into runs of utterances within it (`lattice_chunks`, each cropped to its own longest
    utterance); in training each run goes through ``torch.utils.checkpoint``, so its logits are
    freed after the forward and recomputed in the backward: one run's lattice is alive at a time,
    for one more joiner forward. Results equal the unsplit loss (a sum over utterances).

    Args:
        head: `asr_pe.models.transducer.TransducerHead`.
        enc: (B, T, D) encoder output; lengths (B,) valid frames (>= 1).
        targets: (B, U) labels padded with -1; target_lengths (B,).
        reduction: as `ctc_loss` (``mean_per_utt``, ``sum``, ``mean_per_token``, ``none``).
    Returns:
        (loss, finite) with finite a (B,) mask of utterances with a finite loss (non-finite ones
        are left out of the reduction, as in `ctc_loss`).
    """
    if reduction not in CTC_REDUCTIONS:
        raise ValueError(f"reduction must be one of {CTC_REDUCTIONS}, got {reduction!r}")
    if enc.dim() != 3:
        raise ValueError(f"enc must be (B, T, D), got shape {tuple(enc.shape)}")
    batch = enc.shape[0]
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=enc.device)
    targets = torch.as_tensor(targets, dtype=torch.long, device=enc.device)
    target_lengths = torch.as_tensor(target_lengths, dtype=torch.long, device=enc.device)
    if lengths.shape != (batch,) or int(lengths.min()) < 1 or int(lengths.max()) > enc.shape[1]:
        raise ValueError(f"lengths must be ({batch},) in [1, {enc.shape[1]}], got {lengths.tolist()}")
    _check_targets(targets, target_lengths, head.joiner.out.out_features, head.blank)
    enc_proj, pred_proj = head.project(enc, targets)  # (B, T, J), (B, U+1, J)
    frames, labels = lengths.tolist(), target_lengths.tolist()
    budget = None if head.lattice_budget_mb is None else head.lattice_budget_mb * 2**20
    runs = lattice_chunks(frames, labels, head.joiner.out.in_features, head.joiner.out.out_features, budget)
    if len(runs) == 1:
        losses = _rnnt_losses(head, enc_proj, pred_proj, targets, lengths, target_lengths)
    else:
        parts = []
        for s, e in runs:
            args = (enc_proj[s:e], pred_proj[s:e], targets[s:e], lengths[s:e], target_lengths[s:e])
            if torch.is_grad_enabled():
                parts.append(torch.utils.checkpoint.checkpoint(
                    lambda *a: _rnnt_losses(head, *a), *args, use_reentrant=False))
            else:
                parts.append(_rnnt_losses(head, *args))
        losses = torch.cat(parts)  # (B,)
    finite = torch.isfinite(losses)
    if reduction == "none":
        return losses, finite
    kept = losses[finite]
    if kept.numel() == 0:
        return enc.sum() * 0.0, finite
    if reduction == "sum":
        loss = kept.sum()
    elif reduction == "mean_per_utt":
        loss = kept.sum() / kept.numel()
    else:
        loss = kept.sum() / target_lengths[finite].sum().clamp(min=1)
    return loss, finite
