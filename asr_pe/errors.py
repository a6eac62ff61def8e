"""The error every layer raises for a configuration value that cannot work.

Its message is one line that names the key (``optim.lr=-1``) and what to do; the entry points
print it as ``error: <message>`` and exit with status 2 (``asr_pe.training.cli.friendly_errors``).
It lives at the top of the package so that ``inference/`` (transcribe settings, decoding
settings, checkpoints) and ``training/`` (the training config) share it without importing each
other.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting or input file that cannot work; ``str(e)`` names it and says what to do."""


__all__ = ["ConfigError"]
