"""Several loggers behind one: every logger gets every result, even when another one fails."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lighteval_nanotron.errors import TrackingError
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.logger import EvaluationLogger

logger = logging.getLogger(__name__)


class LoggerContainer(EvaluationLogger):
    """Fans a result out to its loggers; failures are collected and raised together at the end,
    so a broken W&B connection cannot stop the results file from being written. The TrackingError
    is their one report (no traceback; it is logged at DEBUG level)."""

    def __init__(self, loggers: Sequence[EvaluationLogger] = ()) -> None:
        self.loggers = list(loggers)

    def log(self, result: EvaluationResult) -> None:
        self._each("log", result)

    def close(self) -> None:
        self._each("close")

    def _each(self, method: str, *args: object) -> None:
        failures = []
        for child in self.loggers:
            try:
                getattr(child, method)(*args)
            except Exception as error:
                # said once, in the TrackingError below; the traceback only at DEBUG level
                logger.debug("%s.%s failed", type(child).__name__, method, exc_info=True)
                failures.append(f"{type(child).__name__}: {type(error).__name__}: {error}")
        if failures:
            raise TrackingError(
                f"{len(failures)} results logger(s) failed in {method}(): "
                + "; ".join(failures)
                + ". The other loggers ran; fix the failing destination (path, permissions, "
                "credentials) or disable that logger."
            )
