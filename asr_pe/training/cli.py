"""Turn expected user errors into one clear line instead of a stack trace."""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from asr_pe.data.audio import AudioError
from asr_pe.data.manifest import ManifestError
from asr_pe.data.tokenizer import TokenizerError
from asr_pe.errors import ConfigError
from asr_pe.evaluation.settings import EvalSettingsError
from asr_pe.inference.device import DeviceError
from asr_pe.models.encoder import EncoderConfigError
from asr_pe.models.positional import UnknownPEError
from asr_pe.models.positional.learned import PositionLimitError

from .resume import ResumeError
from .run_dir import PreparedDataMismatch, ResumeConflict
from .run_lock import RunInUseError
from .slurm import SlurmLayoutError
from .stops import NonFiniteConfigError, TrainingStopped

USER_ERRORS = (ManifestError, AudioError, TokenizerError, UnknownPEError, FileNotFoundError, FileExistsError,
               SlurmLayoutError, DeviceError, EvalSettingsError, EncoderConfigError, NonFiniteConfigError,
               ResumeError, ResumeConflict, PreparedDataMismatch, RunInUseError, ConfigError, PositionLimitError)


@contextlib.contextmanager
def friendly_errors():
    """Print ``error: <message>`` and exit 2 for bad input, and the `TrainingStopped` exit code (143 for
    SIGTERM, 3 for divergence) for a training that ended early; ASR_PE_DEBUG=1 shows the traceback."""
    try:
        yield
    except USER_ERRORS as e:
        if os.environ.get("ASR_PE_DEBUG"):
            raise
        logging.getLogger("asr_pe").debug("user error", exc_info=True)
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except TrainingStopped as e:  # stopped by a signal or diverged: not bad input, its own exit code
        if os.environ.get("ASR_PE_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
