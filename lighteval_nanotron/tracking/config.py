"""Which destinations an evaluation's results go to: `open_loggers(options)` from the tracking
options (`options.TrackingOptions`, declared once for the hook, `eval` and `TrackingConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lighteval_nanotron.options import TrackingOptions
from lighteval_nanotron.tracking.atomic import check_writable
from lighteval_nanotron.tracking.container import LoggerContainer
from lighteval_nanotron.tracking.details_logger import DetailsParquetLogger
from lighteval_nanotron.tracking.json_logger import ResultsJsonLogger
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.tensorboard_logger import TensorBoardLogger


def open_loggers(
    options: TrackingOptions,
    tensorboard_dir: str | None = None,
    tensorboard_writer: Any = None,
    wandb_run: Any = None,
) -> LoggerContainer:
    """The loggers `options.loggers` asks for (`log`, the text table, is the caller's job). Pass
    the trainer's `SummaryWriter` / W&B run to log next to the training loss instead of opening
    new ones; TensorBoard events go to `tensorboard_dir`, else `<output_dir>/tensorboard`. The
    folders they write to are checked first (TrackingError when one cannot be written: before
    anything is evaluated)."""
    loggers: list[EvaluationLogger] = []
    if {"json", "details"} & set(options.loggers):
        check_writable(options.output_dir, "output folder")
    if "tensorboard" in options.loggers and tensorboard_writer is None:
        check_writable(tensorboard_dir or Path(options.output_dir) / "tensorboard", "TensorBoard folder")
    if "json" in options.loggers:
        loggers.append(ResultsJsonLogger(Path(options.output_dir)))
    if "details" in options.loggers:
        loggers.append(DetailsParquetLogger(Path(options.output_dir)))
    if "tensorboard" in options.loggers:
        if tensorboard_writer is not None:
            loggers.append(TensorBoardLogger(writer=tensorboard_writer, prefix=options.tensorboard_prefix))
        else:
            log_dir = tensorboard_dir or str(Path(options.output_dir) / "tensorboard")
            loggers.append(TensorBoardLogger(log_dir=log_dir, prefix=options.tensorboard_prefix))
    if "wandb" in options.loggers:
        from lighteval_nanotron.tracking.wandb_logger import WandbLogger

        loggers.append(WandbLogger(options, run=wandb_run))
    return LoggerContainer(loggers)


@dataclass(kw_only=True)
class TrackingConfig(TrackingOptions):
    """The tracking options and a TensorBoard folder, with a `build()`."""

    tensorboard_dir: Optional[str] = None
    """TensorBoard event folder. Unset: `<output_dir>/tensorboard`. Ignored when `build()` gets
    the trainer's own writer."""

    def named(self, option: str) -> str:
        return f"TrackingConfig.{option}"

    def build(self, tensorboard_writer: Any = None, wandb_run: Any = None) -> LoggerContainer:
        """The loggers this config asks for (`open_loggers`)."""
        return open_loggers(self, self.tensorboard_dir, tensorboard_writer, wandb_run)
