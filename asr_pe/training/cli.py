"""Turn expected user errors into one clear line instead of a stack trace.

``friendly_errors`` covers the work of an entry point; ``run_hydra_main`` covers its command line
(a ``@hydra.main`` function's unknown key, bad override syntax or missing ``run=``), so both end the
same way: ``error: <message>`` on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable

from hydra.errors import HydraException
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from asr_pe.errors import UserError


def print_error(message: str) -> None:
    """``error: <message>`` on stderr in one write: the ranks of a DDP run stop together and share
    one stderr, and print's separate write of the newline let two ranks' lines run into one."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def friendly_errors():
    """Print ``error: <message>`` and exit with the error's ``exit_code`` for every
    `asr_pe.errors.UserError`: 2 for bad input (a required ``???`` setting not given included),
    143 / 3 for a training stopped by SIGTERM / diverged (`asr_pe.training.stops`);
    ASR_PE_DEBUG=1 shows the traceback.

    Exiting here, inside the Hydra task, keeps Hydra from adding its "Error executing job" line."""
    try:
        yield
    # bad input (exit 2), a training stopped early (143 SIGTERM, 3 diverged), or a required setting
    # (``run: ???``) not given on the command line (exit 2)
    except (UserError, MissingMandatoryValue) as e:
        if os.environ.get("ASR_PE_DEBUG"):
            raise
        logging.getLogger("asr_pe").debug("user error", exc_info=True)
        print_error(str(e) if isinstance(e, UserError) else _command_line_error(e))
        sys.exit(getattr(e, "exit_code", 2))


def _command_line_error(e: Exception) -> str:
    """One line for a Hydra/OmegaConf error of the command line (Hydra's own messages span lines)."""
    missing = re.search(r"Missing mandatory value: ?(\S+)", str(e))
    if isinstance(e, MissingMandatoryValue) or missing:
        key = missing.group(1) if missing else getattr(e, "full_key", "?")
        return f"{key}=… is required (see --help)"
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    # OmegaConf appends context lines (full_key: …, object_type=…) that say nothing to a user
    return " ".join(line for line in lines if not line.startswith(("full_key:", "object_type=")))


def run_hydra_main(main: Callable[[], object]) -> None:
    """Call a ``@hydra.main``-decorated ``main`` with the project's error convention.

    Hydra reports a bad command line (``bogus=1``, ``run=[a``, a required ``run`` not given) in
    several lines and exits 1. Here such errors reach us instead (Hydra's own switch,
    ``HYDRA_FULL_ERROR=1``) and end as one ``error:`` line and exit 2. An exception raised inside
    the task function itself is not a command-line error and keeps its traceback, unless it is a
    missing mandatory value (a ``???`` setting nobody gave). ``ASR_PE_DEBUG=1`` shows every traceback.
    """
    task_code = getattr(main, "__wrapped__", main).__code__  # hydra.main keeps the task function here
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        main()
    except (HydraException, OmegaConfBaseException) as e:
        in_task = any(frame.f_code is task_code for frame, _ in traceback.walk_tb(e.__traceback__))
        if os.environ.get("ASR_PE_DEBUG") or (in_task and not isinstance(e, MissingMandatoryValue)):
            raise
        print_error(_command_line_error(e))
        sys.exit(2)
