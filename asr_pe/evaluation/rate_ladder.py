"""The rate ladder: one test set decoded at several speaking rates, error rate versus rate per PE.

The CAPE paper's claim is about rate as much as length: its global scaling (a random hop per
training utterance) should make a model indifferent to how fast the same words come. The ladder
asks that of every PE, in-context style: the *same utterances* at every rung, so a rung differs
from the plain one only by the rate.

- axis ``tempo`` (`DEFAULT_TEMPOS` 0.8 ... 1.3): the audio time-stretched, pitch kept
  (``eval.tempo``; `asr_pe.data.tempo`), the paper's ``sox tempo``;
- axis ``hop_ms`` (`DEFAULT_HOPS` 8 ... 12 ms): the features computed with another hop
  (``eval.hop_ms``), the paper's hop figures; the model's rate is run hop / hop.

`evaluate_rates` decodes one run at every rung through `asr_pe.evaluation.pipeline.evaluate_run`
(each rung's results in their own folder, ``eval/<set>_tempo1p2``; rate 1 and the run's own hop
are the plain ``eval/<set>``; with ``reuse`` a rung already decoded from the same checkpoint
bytes and settings is read back), so a ladder stopped half-way resumes where it stopped.

`asr_pe.plots.rate_ladder` reads the rungs of many runs (seeds of one label pooled; `wer_vs_length.load_runs`
labels them) and per label and rung computes, from each run's ``per_utt.jsonl``:
- the rate: Σ errors / Σ reference words (characters for CER) over the utterances and seeds, with
  a 95 % crossed bootstrap CI (utterances resampled, one draw for every seed, then seeds;
  `asr_pe.evaluation.in_context.two_level_ratio_ci`);
- the ratio to the plain rung (rate 1, or the run's own hop): Σ errors at the rung / Σ errors at
  the plain rung (the references are the same, so it is the ratio of the rates), with the same
  crossed CI over the utterances' (rung, plain) error pairs: paired, as the in-context ratio is.
Every rung of every seed must have scored the same utterance ids as the plain rung, or the
ladder is refused (`RateLadderError`): a rung on other utterances would not be the same words.

`asr_pe.plots.rate_ladder.rate_report` writes ``rate_<axis>.{png,md,csv}``: WER and the ratio
against the rate per PE (``scripts/plot_rate_ladder.py``); ``scripts/evaluate_rates.py`` decodes.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from asr_pe.errors import UserError
from asr_pe.evaluation.rate import Rate
from asr_pe.evaluation.reuse import Reuse
from asr_pe.results_table import locate
from asr_pe.run_folder import config_path, read_config

__all__ = ["AXES", "DEFAULT_TEMPOS", "DEFAULT_HOPS", "RateLadderError", "rung_rate", "run_hop_ms",
           "evaluate_rates", "default_values"]

log = logging.getLogger(__name__)

AXES = ("tempo", "hop_ms")
DEFAULT_TEMPOS = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
DEFAULT_HOPS = (8.0, 9.0, 10.0, 11.0, 12.0)


class RateLadderError(UserError, ValueError):
    """A rate ladder that cannot be drawn (a missing rung, rungs on other utterances, a bad axis)."""


def _check_axis(axis: str) -> None:
    if axis not in AXES:
        raise RateLadderError(f"axis {axis!r}: choose one of {AXES}")


def default_values(axis: str) -> tuple[float, ...]:
    """The default rungs of an axis: `DEFAULT_TEMPOS` or `DEFAULT_HOPS`."""
    _check_axis(axis)
    return DEFAULT_TEMPOS if axis == "tempo" else DEFAULT_HOPS


def rung_rate(axis: str, value: float, run_hop_ms: float) -> Rate:
    """The `Rate` of a rung: ``tempo=value``, or ``hop_ms=value`` (the run's own hop: plain)."""
    _check_axis(axis)
    if axis == "tempo":
        return Rate(float(value))
    return Rate(hop_ms=None if float(value) == float(run_hop_ms) else float(value))


def run_hop_ms(run_dir: str | Path) -> float:
    """The run's own feature hop (``data.features.frame_shift_ms`` of its config.yaml). Read once
    per version of the file: a report asks it for every rung of every run (the claims checker
    2,600 times), and parsing the YAML was 70 % of its time."""
    folder = locate(Path(run_dir))
    path = config_path(folder)
    if not path.is_file():
        read_config(folder)  # its error names the folder
    stat = path.stat()
    return _hop_ms(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4096)
def _hop_ms(config_file: str, mtime_ns: int, size: int) -> float:
    return float(read_config(Path(config_file).parent).data.features.frame_shift_ms)


def evaluate_rates(run_dir: str | Path, *, axis: str = "tempo", values: Sequence[float] = DEFAULT_TEMPOS,
                   overrides: Mapping[str, Any] | None = None, corpus_manifests: Callable, device: str | None = None,
                   reuse: Reuse | None = None) -> dict[float, dict[str, list[dict]]]:
    """Decode ``run_dir`` at every rung (``eval.<axis>=value``); {value: {result name: bucket rows}}.

    ``overrides``: what `evaluate_run` takes (``decode``, ``eval``, ``data.test``); the rung's key
    replaces any ``eval.<axis>`` in it. ``reuse`` (default: a fresh `Reuse`): rungs decoded before
    from the same checkpoint bytes and settings are read back."""
    from asr_pe.evaluation.pipeline import evaluate_run   # the one evaluation of a run folder

    _check_axis(axis)
    if not values:
        raise RateLadderError("a rate ladder needs at least one rung")
    overrides = dict(overrides or {})
    reuse = reuse if reuse is not None else Reuse()
    out = {}
    for value in values:
        eval_keys = {**dict(overrides.get("eval") or {}), axis: float(value)}
        log.info("rate ladder %s: eval.%s=%g", run_dir, axis, value)
        out[float(value)] = evaluate_run(run_dir, {**overrides, "eval": eval_keys}, device,
                                         corpus_manifests=corpus_manifests, reuse=reuse)
    log.info("rate ladder %s: %s", run_dir, reuse.summary())
    return out
