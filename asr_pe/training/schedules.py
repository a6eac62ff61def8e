"""Learning-rate schedules as multipliers of the peak LR, per optimizer step."""

from __future__ import annotations

import math


def lr_multiplier(step: int, *, kind: str, warmup_steps: int, total_steps: int | None = None,
                  min_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate at ``step`` (0-based).

    * ``noam`` / ``inverse_sqrt``: linear warmup to 1 at ``warmup_steps``, then
      sqrt(warmup/step) (the Transformer's schedule with the peak LR set directly);
    * ``cosine``: linear warmup, then cosine decay to ``min_ratio`` at ``total_steps``;
    * ``constant``: linear warmup, then 1.
    """
    step = step + 1
    warm = max(1, warmup_steps)
    if step <= warm:
        return step / warm
    if kind in ("noam", "inverse_sqrt"):
        return max(min_ratio, math.sqrt(warm / step))
    if kind == "cosine":
        assert total_steps and total_steps > warm, "cosine schedule needs total_steps > warmup_steps"
        progress = min(1.0, (step - warm) / (total_steps - warm))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    if kind == "constant":
        return 1.0
    raise ValueError(f"unknown schedule {kind!r}; choose noam, inverse_sqrt, cosine or constant")
