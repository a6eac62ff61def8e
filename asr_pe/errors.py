"""The one error class the entry points turn into ``error: <message>`` and an exit status.

Every error that a user can act on (a setting that cannot work, a missing or malformed input
file, a run folder in use, a training stopped early) is a `UserError`: its message is one line
that names the key, file or folder and what to do. ``train.py``, ``evaluate.py``,
``transcribe.py`` and ``score.py`` catch this class and nothing else
(`asr_pe.training.cli.friendly_errors`), print the message and exit with ``exit_code`` (2 for
bad input; a stopped training has its own, `asr_pe.training.stops`). Anything else is a bug and
keeps its traceback.

The subclasses keep the builtin type they always had (``ValueError``, ``FileNotFoundError``, ...),
so code and tests that catch those still do. This module imports nothing: ``data/``, ``models/``,
``inference/`` and ``training/`` all raise these without importing each other.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input or a request that cannot be done as asked; ``str(e)`` is one line saying what to do."""

    exit_code = 2


class ConfigError(UserError, ValueError):
    """A setting or input file that cannot work; ``str(e)`` names it and says what to do."""


class MissingFileError(UserError, FileNotFoundError):
    """An input file or folder the command needs is not there; ``str(e)`` names it."""


class FolderTakenError(UserError, FileExistsError):
    """A folder already holds something this command must not overwrite."""


class NotDistributions(UserError, ValueError):
    """Attention weights (or statistics of them) whose rows are not probability distributions, such
    as REM's softmax mixed with its signed recurrence matrix: a share or a distance of them means nothing."""


__all__ = ["ConfigError", "FolderTakenError", "MissingFileError", "NotDistributions", "UserError"]
