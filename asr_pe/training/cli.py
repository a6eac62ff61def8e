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
from asr_pe.inference.device import DeviceError
from asr_pe.models.encoder import EncoderConfigError
from asr_pe.models.positional import UnknownPEError
from asr_pe.models.positional.learned import PositionLimitError

from .evaluate import EvalSettingsError
from .slurm import SlurmLayoutError

USER_ERRORS = (ManifestError, AudioError, TokenizerError, UnknownPEError, FileNotFoundError, FileExistsError,
               SlurmLayoutError, DeviceError, EvalSettingsError, EncoderConfigError, ConfigError, PositionLimitError)


@contextlib.contextmanager
def friendly_errors():
    """Print ``error: <message>`` and exit 2 for bad input; ASR_PE_DEBUG=1 shows the traceback."""
    try:
        yield
    except USER_ERRORS as e:
        if os.environ.get("ASR_PE_DEBUG"):
            raise
        logging.getLogger("asr_pe").debug("user error", exc_info=True)
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
