"""The embedded synthetic speech corpus: generated English sentences spoken by espeak-ng.

``prepare_synth(**config)`` builds (once, cached) and returns the train/dev/test manifest
paths; see :mod:`asr_pe.data.synth.corpus`. The heavy imports (torch, torchaudio) happen
only when those functions are first used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_synth_corpus", "prepare_synth", "SynthConfig"]


def __getattr__(name: str) -> Any:
    # Lazy: the espeak server runs espeak.py standalone and the generator needs no torch.
    if name in __all__:
        from asr_pe.data.synth import corpus

        return getattr(corpus, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
