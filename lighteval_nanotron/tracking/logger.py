"""The logger interface: the pipeline decides *what* was measured, a logger decides *where* it goes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lighteval_nanotron.pipeline.result import EvaluationResult


class EvaluationLogger:
    """A logger that does nothing; subclasses override the hooks they need.

    Loggers run on the reporting rank only and never see a process group.
    """

    def log(self, result: EvaluationResult) -> None:
        """Record one evaluation (its `step`, if any, says where it belongs on the training axis)."""

    def close(self) -> None:
        """Flush and release what the logger opened. Safe to call twice."""
