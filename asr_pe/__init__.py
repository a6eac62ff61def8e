"""asr_pe: positional encodings for speech recognition on audio longer than training."""

__version__ = "0.1.0"
