"""The results loggers, opened on the reporting rank only (DP 0 / TP 0 of the output pipeline
stage: the one rank that receives the results), from the options' tracking settings."""

from __future__ import annotations

from typing import Any

from lighteval_nanotron.models.interface import LightevalModel
from lighteval_nanotron.options import TrackingOptions
from lighteval_nanotron.tracking import LoggerContainer


def open_loggers(engine: LightevalModel, options: TrackingOptions, wandb_run: Any = None) -> LoggerContainer | None:
    """A `LoggerContainer` on the reporting rank (into `wandb_run` when the training opened one),
    None on every other rank. `log` (the results table) is the caller's to print."""
    from lighteval_nanotron.tracking import open_loggers as open_tracking_loggers

    if not engine.is_reporting_rank:
        return None
    return open_tracking_loggers(options, wandb_run=wandb_run)
