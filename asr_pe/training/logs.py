"""One line per log record, no third-party tips.

Lightning gives its ``lightning`` / ``lightning.pytorch`` / ``lightning.fabric`` loggers console handlers of their
own; under Hydra's job logging (a handler on the root logger) each of their records then prints
twice. And Lightning 2.6 logs an advertisement ("Tip: ... litlogger") on every Trainer.
"""

from __future__ import annotations

import logging

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in str(record.msg)


_DROP_TIPS = _DropTips()


def conventional_logging() -> None:
    """Where the root logger has handlers (Hydra), Lightning's records go through them only."""
    if logging.getLogger().handlers:
        for name in LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            for handler in list(logger.handlers):
                if type(handler) is logging.StreamHandler:  # Lightning's own console handler
                    logger.removeHandler(handler)
            logger.propagate = True
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if _DROP_TIPS not in logger.filters:
            logger.addFilter(_DROP_TIPS)
