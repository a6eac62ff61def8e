"""Evaluation at another speaking rate (``eval.tempo``) or feature hop (``eval.hop_ms``).

The CAPE paper's second axis: the same words, faster or slower. Two knobs, both at evaluation
only, both leaving the model as trained:

- ``eval.tempo=<factor>``: each test wave is time-stretched ``factor`` times faster with its pitch
  kept (sox's ``tempo``; `asr_pe.data.tempo.time_stretch`) before its features: 1.2 = 20 % faster,
  0.8 = 20 % slower; the paper re-encoded WSJ's dev set with ``sox tempo -s 1.2``;
- ``eval.hop_ms=<ms>``: the filterbank's frame shift (``data.features.frame_shift_ms`` of the run,
  10 ms) changed, window length kept: at 12 ms a second of speech gives 83 frames instead of 100,
  so the model, which still takes each frame for 10 ms, sees speech 1.2 times faster; the paper's
  ``wsj_hop`` figures (CAPE's global scaling draws a hop of about 9.5 ± 0.9 ms per utterance).

A rate result is not a plain result: `rate_suffix` names its folder (``eval/<set><suffix>_tempo1p2``,
``..._hop12``, ``..._tempo0p8_hop12``) after whatever suffix the evaluation has otherwise (``eval.suffix``
or the remedy's), so it never replaces or mixes with the plain decoding of the set; its settings
record (`asr_pe.evaluation.reuse.decoding_settings`) holds ``tempo`` / ``hop_ms``, so a reused folder
is one of the same rate (`stale_reason`), and ``buckets.meta.json`` names them. ``tempo: 1`` and a
hop equal to the run's own are the plain evaluation: no suffix, no key, the plain folder (a rate
ladder's 1.0 rung is the plain result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from asr_pe.data.tempo import TempoError, check_tempo

__all__ = ["Rate", "RateError", "rate_of", "check_rate_settings", "number_tag"]

MIN_HOP_MS, MAX_HOP_MS = 2.0, 40.0   # a feature hop outside these is no frame rate a speech model reads


class RateError(ValueError):
    """A bad ``eval.tempo`` or ``eval.hop_ms``."""


def number_tag(x: float) -> str:
    """``1.2`` -> ``1p2``, ``12.0`` -> ``12``: a number in a folder name."""
    return f"{float(x):g}".replace(".", "p").replace("-", "m")


@dataclass(frozen=True)
class Rate:
    """One evaluation's speaking rate: ``tempo`` (1 = as recorded) and ``hop_ms`` (None = the run's own)."""
    tempo: float = 1.0
    hop_ms: float | None = None

    @property
    def plain(self) -> bool:
        return self.tempo == 1.0 and self.hop_ms is None

    @property
    def suffix(self) -> str:
        """``_tempo1p2``, ``_hop12``, ``_tempo0p8_hop12``; "" for the plain rate."""
        return (f"_tempo{number_tag(self.tempo)}" if self.tempo != 1.0 else "") + \
               (f"_hop{number_tag(self.hop_ms)}" if self.hop_ms is not None else "")

    def record(self) -> dict[str, float]:
        """The keys a settings record and ``buckets.meta.json`` get: none for the plain rate."""
        return {**({"tempo": self.tempo} if self.tempo != 1.0 else {}),
                **({"hop_ms": self.hop_ms} if self.hop_ms is not None else {})}

    def frames_per_audio_second(self, run_hop_ms: float) -> float:
        """How many of the model's seconds (frames at its own hop) one second of the recording
        becomes: 1 / tempo · run_hop / hop."""
        hop = self.hop_ms if self.hop_ms is not None else run_hop_ms
        return (1.0 / self.tempo) * (run_hop_ms / hop)


def check_rate_settings(settings: Mapping[str, Any]) -> None:
    """``eval.tempo`` a factor in [0.25, 4]; ``eval.hop_ms`` null or a number of ms in [2, 40]."""
    try:
        check_tempo(settings.get("tempo", 1.0))
    except TempoError as e:
        raise RateError(f"eval.{e}") from None
    hop = settings.get("hop_ms")
    if hop is not None:
        ok = isinstance(hop, (int, float)) and not isinstance(hop, bool) and math.isfinite(hop)
        if not ok or not MIN_HOP_MS <= hop <= MAX_HOP_MS:
            raise RateError(f"eval.hop_ms={hop!r}: a feature hop in ms in [{MIN_HOP_MS:g}, {MAX_HOP_MS:g}] "
                            "(null: the run's own, data.features.frame_shift_ms)")


def rate_of(settings: Mapping[str, Any], run_hop_ms: float) -> Rate:
    """The evaluation's `Rate`: a hop equal to the run's own (``run_hop_ms``) is no change."""
    check_rate_settings(settings)
    hop = settings.get("hop_ms")
    hop = None if hop is None or float(hop) == float(run_hop_ms) else float(hop)
    return Rate(float(settings.get("tempo", 1.0)), hop)
