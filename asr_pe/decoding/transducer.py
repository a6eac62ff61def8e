"""Transducer decoding: greedy search and modified beam search, frame by frame.

Both run over the encoder output one frame at a time: the joiner is evaluated on (N, J) rows
(N hypotheses or utterances) per frame and symbol, so memory is O(N·V) whatever the length of
the recording; the (T, U+1, V) lattice that training scores is never built (a 60-minute
recording at 40 ms has T = 90,000 frames).

``transducer_greedy(head, enc, lengths, max_symbols_per_frame=3)``: at each frame take the
most probable symbol; a label is emitted, the prediction network advances, and the same frame is
read again, until blank or ``max_symbols_per_frame`` labels were emitted on the frame (the cap
keeps a model that never predicts blank from looping; NeMo's ``max_symbols_per_step``, icefall's
``max_sym_per_frame``). Batched over utterances.

``transducer_beam(head, enc, length, beam=4)``: *modified beam search* (icefall's
``modified_beam_search``; ESPnet's ``modified_beam_search``, Kim et al. 2020 "Accelerating
RNN-T training and inference using CTC guidance" and k2's fast_beam_search family): at most one
symbol per frame. For each frame every hypothesis in the beam is extended by every symbol
(blank keeps its labels, a label appends itself), the ``beam`` best of the N·V extensions are
kept, and extensions that end with the same labels are merged (log-sum-exp of their scores).
Why this and not the standard Graves (2012) beam search: Graves' search allows any number of
labels per frame through an inner loop whose length depends on the data, with prefix merging
across the loop; the one-symbol search does a fixed amount of work per frame (one batched
joiner call over the beam), so its cost is linear in T and predictable on a 60-minute
recording, and icefall reports it as accurate as, or more accurate than, the standard search
with the stateless predictor at a fraction of the time. Its limit: at most T labels, so a
front end must give at least as many frames as the transcript has tokens (40 ms frames give 25
a second; characters of read speech come at ~15 a second); greedy keeps the per-frame cap.

Scores are log-probabilities of the joiner's softmax (p of blank included), the hypothesis
score is the sum over its path; the final hypothesis is the best-scoring label sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from asr_pe.models.transducer import merge_state, select_state

__all__ = ["transducer_greedy", "transducer_beam", "transducer_beam_batch"]


@torch.no_grad()
def transducer_greedy(head, enc: torch.Tensor, lengths: torch.Tensor, max_symbols_per_frame: int = 3) -> list[list[int]]:
    """enc (B, T, D), lengths (B,) -> label ids per utterance (blank never in them)."""
    if max_symbols_per_frame < 1:
        raise ValueError(f"max_symbols_per_frame must be >= 1, got {max_symbols_per_frame}")
    batch = enc.shape[0]
    device = enc.device
    pred, joiner, blank = head.predictor, head.joiner, head.blank
    lengths = torch.as_tensor(lengths, device=device)
    out, state = pred.start(batch, device)  # (B, P)
    pred_proj = joiner.pred_proj(out)  # (B, J)
    hyps: list[list[int]] = [[] for _ in range(batch)]
    for t in range(int(lengths.max()) if batch else 0):
        enc_t = joiner.enc_proj(enc[:, t])  # (B, J): one frame projected once
        active = lengths > t  # (B,)
        for _ in range(max_symbols_per_frame):
            best = joiner(enc_t, pred_proj).argmax(-1)  # (B,)
            emit = active & (best != blank)
            if not bool(emit.any()):
                break
            for b in torch.nonzero(emit).flatten().tolist():
                hyps[b].append(int(best[b]))
            new_out, new_state = pred.step(best.masked_fill(~emit, blank), state)
            state = merge_state(pred, state, new_state, emit)
            pred_proj = torch.where(emit[:, None], joiner.pred_proj(new_out), pred_proj)
            active = emit
    return hyps


@dataclass
class _Hyp:
    labels: tuple[int, ...]
    score: float
    index: int  # row of this hypothesis' predictor state / projection


@torch.no_grad()
def transducer_beam(head, enc: torch.Tensor, length: int | None = None, beam: int = 4) -> list[tuple[list[int], float]]:
    """Modified beam search over one utterance: enc (T, D) -> [(labels, log score)], best first."""
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    frames = enc.shape[0] if length is None else int(length)
    device = enc.device
    pred, joiner, blank = head.predictor, head.joiner, head.blank
    out, state = pred.start(1, device)
    pred_proj = joiner.pred_proj(out)  # (N, J), N hypotheses
    hyps = [_Hyp((), 0.0, 0)]
    enc_proj = joiner.enc_proj(enc[:frames])  # (T, J)
    for t in range(frames):
        rows = torch.tensor([h.index for h in hyps], device=device)
        log_p = torch.log_softmax(joiner(enc_proj[t].expand(len(hyps), -1), pred_proj[rows]).float(), -1)  # (N, V)
        total = log_p + torch.tensor([h.score for h in hyps], device=device)[:, None]  # (N, V)
        vocab = total.shape[1]
        scores, flat = total.flatten().topk(min(beam, total.numel()))
        merged: dict[tuple[int, ...], list] = {}  # labels -> [score, source hyp, new label or None]
        for score, k in zip(scores.tolist(), flat.tolist()):
            src, sym = hyps[k // vocab], k % vocab
            labels = src.labels if sym == blank else src.labels + (sym,)
            if labels in merged:
                merged[labels][0] = float(torch.logaddexp(torch.tensor(merged[labels][0]), torch.tensor(score)))
            else:
                merged[labels] = [score, src, None if sym == blank else sym]
        # advance the prediction network for the hypotheses that emitted a label, in one batch
        grow = [(labels, v) for labels, v in merged.items() if v[2] is not None]
        new_hyps = [_Hyp(labels, v[0], v[1].index) for labels, v in merged.items() if v[2] is None]
        if grow:
            src_rows = torch.tensor([v[1].index for _, v in grow], device=device)
            tokens = torch.tensor([v[2] for _, v in grow], device=device)
            out, grown = pred.step(tokens, select_state(pred, state, src_rows))
            base = pred_proj.shape[0]
            pred_proj = torch.cat([pred_proj, joiner.pred_proj(out)])
            state = tuple(torch.cat([s, g], dim=d) for s, g, d in zip(state, grown, pred.state_batch_dims))
            new_hyps += [_Hyp(labels, v[0], base + i) for i, (labels, v) in enumerate(grow)]
        # keep only the rows still referenced (the state store stays O(beam))
        keep = sorted({h.index for h in new_hyps})
        remap = {old: new for new, old in enumerate(keep)}
        keep_t = torch.tensor(keep, device=device)
        pred_proj = pred_proj[keep_t]
        state = select_state(pred, state, keep_t)
        hyps = [_Hyp(h.labels, h.score, remap[h.index]) for h in new_hyps]
    hyps.sort(key=lambda h: -h.score)
    return [(list(h.labels), h.score) for h in hyps]


def transducer_beam_batch(head, enc: torch.Tensor, lengths: torch.Tensor, beam: int = 4) -> list[list[int]]:
    """The best hypothesis of `transducer_beam` for each utterance of a batch."""
    return [transducer_beam(head, enc[b], int(lengths[b]), beam)[0][0] for b in range(enc.shape[0])]
