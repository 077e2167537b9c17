"""A logger for task code: Powertools' layout, with the running job's fields on every line.

::

    from kindling.shared.tasklog import get_logger
    log = get_logger(__name__)

    @task
    def resize(key: str) -> str:
        log.info("resizing", extra={"key": key})   # + job_id, task, attempt of the job

Imports :mod:`logging`, so only tasks that log pay for it; the worker's own lines go
through :mod:`kindling.shared.logs` without it.
"""

from __future__ import annotations

import logging

from kindling.core.batch import current_job
from kindling.shared import logs

__all__ = ["get_logger"]

# Attributes every LogRecord has: anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class _JobHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            entry = {"level": record.levelname, "location": f"{record.funcName}:{record.lineno}",
                     "message": record.getMessage()}
            try:
                job = current_job()
            except LookupError:
                pass
            else:
                entry.update(job_id=job.id, task=job.task, attempt=job.attempt)
            entry.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
            if record.exc_info and record.exc_info[0] is not None:
                entry["exception_name"] = record.exc_info[0].__name__
                entry["exception"] = logging.Formatter().formatException(record.exc_info)
            logs.sink()(entry)
        except Exception:  # noqa: BLE001 - logging must never fail the task
            self.handleError(record)


def get_logger(name: str = "kindling.task") -> logging.Logger:
    """A logger writing through kindling's sink (level from the Powertools/Lambda variables)."""
    logger = logging.getLogger(name)
    if not any(isinstance(h, _JobHandler) for h in logger.handlers):
        logger.addHandler(_JobHandler())
        logger.setLevel(logging.DEBUG)  # the sink applies the configured level
        logger.propagate = False
    return logger
