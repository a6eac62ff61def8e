"""CTC decoding: best-path (greedy) and prefix beam search.

Greedy decoding takes the single most probable frame-level path and collapses it; it
approximates argmax_l p(l | x) by the best *path*, whereas the prefix beam search keeps, for
every surviving label prefix, the total probability of all paths that produce it (split into
paths ending in blank and paths ending in a non-blank label, so that repeated labels are
merged correctly). It can therefore find a labelling whose probability is spread over many
paths and beats the labelling of the single best path.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["ctc_greedy", "ctc_prefix_beam_search", "ctc_beam_batch"]

NEG_INF = float("-inf")


def _check_lengths(lengths: torch.Tensor | Sequence[int] | None, batch: int, frames: int) -> list[int]:
    """Validate (B,) frame counts against a (B, T, V) tensor and return them as ints."""
    if lengths is None:
        return [frames] * batch
    lengths = torch.as_tensor(lengths)
    if lengths.shape != (batch,):
        raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}")
    out = [int(n) for n in lengths.tolist()]
    bad = [n for n in out if n < 0 or n > frames]
    if bad:
        raise ValueError(f"lengths must lie in [0, {frames}] (the number of frames), got {bad}")
    return out


def ctc_greedy(
    log_probs: torch.Tensor, lengths: torch.Tensor | Sequence[int] | None = None, blank: int = 0
) -> list[list[int]]:
    """Best-path decoding: per-frame argmax, collapse repeats, drop blanks.

    Args:
        log_probs: (B, T, V) frame posteriors (log or linear: only the argmax is used).
        lengths: (B,) valid frames per utterance; frames past it are ignored. None: all T.
        blank: index of the CTC blank.
    Returns:
        One list of token ids per utterance.
    """
    if log_probs.dim() != 3:
        raise ValueError(f"ctc_greedy expects (B, T, V) log-probs, got shape {tuple(log_probs.shape)}")
    batch, frames, vocab = log_probs.shape
    if not 0 <= blank < vocab:
        raise ValueError(f"blank={blank} is outside the vocabulary of size {vocab}")
    lens = _check_lengths(lengths, batch, frames)
    best = log_probs.detach().argmax(dim=-1).cpu()  # (B, T)
    hyps = []
    for b in range(batch):
        path = torch.unique_consecutive(best[b, : lens[b]])  # collapse runs of the same label
        hyps.append([int(i) for i in path.tolist() if i != blank])
    return hyps


def ctc_prefix_beam_search(
    log_probs: torch.Tensor,
    beam: int = 10,
    blank: int = 0,
    *,
    prune: float = NEG_INF,
    topk: int | None = None,
) -> list[tuple[list[int], float]]:
    """CTC prefix beam search in log space for one utterance.

    For every prefix l the search keeps log p_b(l) and log p_nb(l), the total probability of
    the frame paths over frames 1..t that collapse to l and end in blank / in l's last label.
    Per frame t, with y = log_probs[t]:

        stay:    p_b(l)  <- (p_b(l) + p_nb(l)) * y_blank
                 p_nb(l) <- p_nb(l) * y_last(l)                 (repeat of the last label)
        extend:  p_nb(l + c) += (p_b(l) + p_nb(l)) * y_c        c != last(l)
                 p_nb(l + c) += p_b(l) * y_c                    c == last(l) (needs a blank between)

    An extension that equals a prefix already in the beam is merged into it, so the merge is
    exact; then the ``beam`` prefixes with the largest p_b + p_nb survive. All tokens are
    considered at every frame (vectorised over the beam and the vocabulary) unless pruned.

    Args:
        log_probs: (T, V) log-posteriors of one utterance (only the valid frames).
        beam: number of prefixes kept after each frame.
        blank: index of the CTC blank.
        prune: tokens whose frame log-prob is below this are not used to extend prefixes
            at that frame (``-inf``: no threshold).
        topk: if set, only the ``topk`` most probable tokens of each frame extend prefixes.
    Returns:
        Up to ``beam`` (token ids, log p(ids | x)) pairs sorted best first; the score is the
        total CTC log-probability of the labelling summed over the paths the search kept
        (exact when no path of it was pruned).
    """
    if log_probs.dim() != 2:
        raise ValueError(f"ctc_prefix_beam_search expects (T, V) log-probs, got shape {tuple(log_probs.shape)}")
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    frames, vocab = log_probs.shape
    if not 0 <= blank < vocab:
        raise ValueError(f"blank={blank} is outside the vocabulary of size {vocab}")
    if topk is not None and topk < 1:
        raise ValueError(f"topk must be >= 1 or None, got {topk}")
    x = log_probs.detach().to(device="cpu", dtype=torch.float64)  # (T, V); float64 for long sums

    prefixes: list[tuple[int, ...]] = [()]
    p_b = torch.zeros(1, dtype=torch.float64)  # (N,) log p_b of each prefix
    p_nb = torch.full((1,), NEG_INF, dtype=torch.float64)  # (N,) log p_nb
    for t in range(frames):
        y = x[t]  # (V,)
        allowed = torch.ones(vocab, dtype=torch.bool)  # tokens that may extend a prefix now
        allowed[blank] = False
        if prune > NEG_INF:
            allowed &= y >= prune
        if topk is not None and topk < vocab:
            top = torch.zeros(vocab, dtype=torch.bool)
            top[torch.topk(y, topk).indices] = True
            allowed &= top
        n_hyp = len(prefixes)
        total = torch.logaddexp(p_b, p_nb)  # (N,)
        last = torch.tensor([p[-1] if p else -1 for p in prefixes], dtype=torch.long)  # (N,)
        has_last = last >= 0
        last_safe = last.clamp(min=0)

        stay_b = total + y[blank]  # (N,)
        stay_nb = torch.where(has_last, p_nb + y[last_safe], torch.full_like(p_nb, NEG_INF))  # (N,)

        ext = total[:, None] + y[None, :]  # (N, V): p_nb(l + c)
        rows = torch.nonzero(has_last).flatten()
        ext[rows, last[rows]] = p_b[rows] + y[last[rows]]  # repeated label needs a blank in between
        ext[:, ~allowed] = NEG_INF

        # Merge extensions that reproduce a prefix already in the beam (l + c == m).
        index = {p: i for i, p in enumerate(prefixes)}
        for i, m in enumerate(prefixes):
            if not m:
                continue
            parent = index.get(m[:-1])
            if parent is not None:
                c = m[-1]
                stay_nb[i] = torch.logaddexp(stay_nb[i], ext[parent, c])
                ext[parent, c] = NEG_INF

        cand = torch.cat([torch.logaddexp(stay_b, stay_nb), ext.flatten()])  # (N + N*V,)
        k = min(beam, cand.numel())
        scores, picked = torch.topk(cand, k)
        finite = torch.isfinite(scores)
        if finite.any():
            picked = picked[finite]
        else:  # every continuation impossible: keep the best one so the search can finish
            picked = picked[:1]
        new_prefixes, new_b, new_nb = [], [], []
        for j in picked.tolist():
            if j < n_hyp:
                new_prefixes.append(prefixes[j])
                new_b.append(stay_b[j])
                new_nb.append(stay_nb[j])
            else:
                n, c = divmod(j - n_hyp, vocab)
                new_prefixes.append(prefixes[n] + (c,))
                new_b.append(torch.tensor(NEG_INF, dtype=torch.float64))
                new_nb.append(ext[n, c])
        prefixes = new_prefixes
        p_b = torch.stack(new_b)
        p_nb = torch.stack(new_nb)

    final = torch.logaddexp(p_b, p_nb).tolist()
    results = [(list(p), float(s)) for p, s in zip(prefixes, final)]
    results.sort(key=lambda r: r[1], reverse=True)
    return results


def ctc_beam_batch(
    log_probs: torch.Tensor,
    lengths: torch.Tensor | Sequence[int] | None = None,
    beam: int = 10,
    blank: int = 0,
    **options,
) -> list[list[tuple[list[int], float]]]:
    """Run :func:`ctc_prefix_beam_search` on each utterance of a (B, T, V) batch.

    Returns one n-best list per utterance; ``options`` (prune, topk) are passed through.
    """
    if log_probs.dim() != 3:
        raise ValueError(f"ctc_beam_batch expects (B, T, V) log-probs, got shape {tuple(log_probs.shape)}")
    batch, frames, _ = log_probs.shape
    lens = _check_lengths(lengths, batch, frames)
    return [
        ctc_prefix_beam_search(log_probs[b, : lens[b]], beam=beam, blank=blank, **options) for b in range(batch)
    ]
