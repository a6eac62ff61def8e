"""Models: front ends, the shared attention, encoders, positional encodings, decoder.

Public API: ``from asr_pe.models import build_encoder`` (see ``encoder.build_encoder``).
"""

from .encoder import build_encoder

__all__ = ["build_encoder"]
