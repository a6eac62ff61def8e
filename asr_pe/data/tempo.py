"""Speaking rate: time-stretch a wave without changing its pitch (sox's ``tempo``).

The CAPE paper's rate experiment re-encodes a test set with ``sox tempo -s <factor>``: the same
words ``factor`` times faster (``factor`` > 1, shorter audio) or slower (< 1), the voice's pitch and
formants kept. `time_stretch` does that on a loaded wave, at evaluation only (``eval.tempo``,
`asr_pe.evaluation.pipeline`; `ASRDataset(tempo=...)`): a wave of N samples becomes one of
round(N / factor) samples, and ``factor == 1`` returns the wave itself, untouched.

Implementation: Signalsmith Stretch (MIT licence; C++ library maintained by Signalsmith Audio)
through the ``python-stretch`` wheel (a pinned dependency in pyproject.toml: another version of the
algorithm gives other waves, so other error rates). What was weighed, on this machine:

- the ``sox`` program (the paper's exact tool, WSOLA): a system package, not something
  ``pip install`` brings, so the project's own install could not guarantee it; torchaudio 2.9+
  (here 2.11) has no sox effects any more;
- ``pyrubberband``: a wrapper that calls the ``rubberband`` program, again a system binary;
  ``pedalboard`` bundles Rubber Band but is GPL-3.0, against this project's Apache-2.0;
- ``audiotsm`` (pure-Python WSOLA, the closest to sox's algorithm): last release 0.1.2 in 2017,
  unmaintained; ``pytsmod``: last release 2023, GPL;
- ``librosa.effects.time_stretch``: a phase vocoder without phase locking (audible "phasiness"
  on speech) and a heavy stack (numba, llvmlite, scikit-learn) for one function;
- ``python-stretch`` 0.3.1: a 113 kB wheel with no dependencies; its output length is exactly
  N / factor, the signal is time-aligned (an onset at t s lands at t / factor s, measured to
  within 4 ms at 0.8, 1.0 and 1.25), and a 220 Hz + 440 Hz tone keeps its peak at 220 Hz
  (`tests/data/test_tempo.py`). Its algorithm is spectral (not sox's time-domain WSOLA), so
  the artefacts differ from the paper's; they are the same for every PE compared.

No PE sees the factor: a model trained at 10 ms hops still reads 10 ms frames, of faster or
slower speech. The other axis, the feature hop (``eval.hop_ms``), changes how many frames a
second of unchanged audio gives (`asr_pe.data.features.FbankExtractor`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["TempoError", "check_tempo", "time_stretch", "MIN_TEMPO", "MAX_TEMPO"]

MIN_TEMPO, MAX_TEMPO = 0.25, 4.0   # beyond these the stretched speech is no longer a speaking rate


class TempoError(ValueError):
    """A tempo factor that is not a number in [MIN_TEMPO, MAX_TEMPO]."""


def check_tempo(factor) -> float:
    """``factor`` as a float, or a TempoError saying what is allowed."""
    ok = isinstance(factor, (int, float)) and not isinstance(factor, bool) and math.isfinite(factor)
    if not ok or not MIN_TEMPO <= factor <= MAX_TEMPO:
        raise TempoError(f"tempo {factor!r}: must be a number in [{MIN_TEMPO}, {MAX_TEMPO}] "
                         "(1 = as recorded, 1.2 = 20 % faster, 0.8 = 20 % slower)")
    return float(factor)


def time_stretch(wave: torch.Tensor, factor: float, sample_rate: int) -> torch.Tensor:
    """``wave`` (N,) float -> (round(N / factor),) float32: ``factor`` times faster, same pitch.

    ``factor == 1`` returns ``wave`` itself. Deterministic: the same wave and factor give the same
    samples (a fresh stretcher per call; no state carried between utterances)."""
    factor = check_tempo(factor)
    assert wave.dim() == 1, f"expected a 1-D wave (N,), got shape {tuple(wave.shape)}"
    if factor == 1.0 or wave.numel() == 0:
        return wave
    from python_stretch import Signalsmith   # imported here: only a stretched evaluation needs it

    stretcher = Signalsmith.Stretch()
    stretcher.preset(1, float(sample_rate))            # one channel, the default (not "cheaper") quality
    stretcher.setTimeFactor(factor)
    x = np.ascontiguousarray(wave.detach().cpu().numpy(), dtype=np.float32)[None]   # (1, N): channels first
    y = stretcher.process(x)[0]                                                     # (round(N / factor),)
    return torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
