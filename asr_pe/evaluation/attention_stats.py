"""How far and how sharply a trained encoder attends, as a function of input length.

A PE that extrapolates keeps each layer's attention pattern when the input grows past the
training lengths: the same mean distance to the attended frames, the same entropy. One that
collapses either spreads out (entropy climbs towards log T, the distance towards T/3: the
uniform pattern) or locks onto offsets it never saw in training. These numbers summarise the
attention maps of ``scripts/plot_attention.py`` over many utterances of each length.

Per head, averaged over the query frames of one utterance (weights ``p[i, j]`` of query i):

* ``mean_distance_s`` = Σ_j p[i, j]·|i − j| · frame shift: how far away the attended frames are;
* ``entropy`` = −Σ_j p[i, j]·ln p[i, j] in nats;
* ``norm_entropy`` = entropy / ln T: 0 for one-hot attention, 1 for uniform over all T keys;
* ``local_mass`` = Σ_{|i − j|·shift ≤ local_s} p[i, j]: the share of attention within ±local_s.
"""

from __future__ import annotations

import math

import torch

from asr_pe.errors import NotDistributions

__all__ = ["STAT_KEYS", "attention_stats"]

STAT_KEYS = ("mean_distance_s", "entropy", "norm_entropy", "local_mass")


def attention_stats(weights: torch.Tensor, frame_shift_s: float, local_s: float = 0.5,
                    query_block: int = 512) -> dict[str, torch.Tensor]:
    """weights (H, T, T) of one unpadded utterance (rows sum to 1) -> {stat: (H,)} (module docstring).

    Queries are processed in blocks of ``query_block`` rows so the |i − j| and p·ln p
    temporaries stay O(block · T) for long inputs.
    """
    assert weights.dim() == 3 and weights.size(1) == weights.size(2), \
        f"expected (H, T, T) weights of one utterance, got {tuple(weights.shape)}"
    assert frame_shift_s > 0, f"frame_shift_s must be > 0, got {frame_shift_s}"
    n_heads, T, _ = weights.shape
    w = weights.double()
    sums_per_row = w.sum(dim=-1)
    if w.min() < -1e-6 or (sums_per_row - 1).abs().max() > 1e-3:
        raise NotDistributions(
            f"attention weights that are not distributions (smallest weight {w.min():.3g}, row sums "
            f"{sums_per_row.min():.3g} to {sums_per_row.max():.3g}): distance, entropy and local share are "
            "defined for attention probabilities (REM mixes the softmax with a signed, unnormalised recurrence "
            "matrix)")
    keys = torch.arange(T, dtype=torch.float64)
    sums = {k: torch.zeros(n_heads, dtype=torch.float64) for k in ("distance", "entropy", "local")}
    for start in range(0, T, query_block):
        p = w[:, start:start + query_block]                                         # (H, b, T)
        queries = torch.arange(start, start + p.size(1), dtype=torch.float64)
        dist = (queries[:, None] - keys[None, :]).abs()                             # (b, T) in frames
        sums["distance"] += (p * dist).sum(dim=(1, 2))
        sums["entropy"] -= torch.special.xlogy(p, p).sum(dim=(1, 2))                # 0·ln 0 = 0
        sums["local"] += (p * (dist * frame_shift_s <= local_s + 1e-9)).sum(dim=(1, 2))
    entropy = sums["entropy"] / T
    return {
        "mean_distance_s": sums["distance"] / T * frame_shift_s,
        "entropy": entropy,
        "norm_entropy": entropy / math.log(T) if T > 1 else torch.zeros_like(entropy),
        "local_mass": sums["local"] / T,
    }
