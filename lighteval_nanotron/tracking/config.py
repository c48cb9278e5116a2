"""Which destinations an evaluation's results go to, as one config with a `build()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.tracking.container import LoggerContainer
from lighteval_nanotron.tracking.details_logger import DetailsParquetLogger
from lighteval_nanotron.tracking.json_logger import ResultsJsonLogger
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.tensorboard_logger import TensorBoardLogger

LOGGER_NAMES = ("json", "details", "tensorboard", "wandb", "log")
WANDB_MODES = (None, "online", "offline", "disabled")


@dataclass
class TrackingConfig:
    """Where results go: the same logger names as the hook's `loggers` setting."""

    output_dir: str
    """Folder of `results/<model>/<step>/results_<date>.json`, `details/` and (by default) `tensorboard/`."""
    loggers: list[str] = field(default_factory=lambda: ["json", "details", "tensorboard"])
    """Any of `json`, `details`, `tensorboard`, `wandb`, `log`. `log` (the text table in the
    training log) is the caller's job: `format_results_table`; `build()` skips it."""
    tensorboard_dir: str | None = None
    """TensorBoard event folder. Unset: `<output_dir>/tensorboard`. Ignored when `build()` gets
    the trainer's own writer."""
    tensorboard_prefix: str = "eval"
    """TensorBoard tags are `<prefix>/<task>/<metric>` (lighteval's `tensorboard_metric_prefix`)."""
    wandb_project: str | None = None
    """W&B project of a new run. Unset: `WANDB_PROJECT`."""
    wandb_entity: str | None = None
    """W&B entity (team or user) of a new run."""
    wandb_mode: str | None = None
    """`online`, `offline` or `disabled`. Unset: `WANDB_MODE`."""
    wandb_dir: str | None = None
    """Folder for W&B's local files. Unset: W&B's default."""

    def __post_init__(self) -> None:
        unknown = [name for name in self.loggers if name not in LOGGER_NAMES]
        if unknown:
            raise ConfigError(f"Unknown logger(s) {unknown}: use a subset of {list(LOGGER_NAMES)}.")
        if self.wandb_mode not in WANDB_MODES:
            raise ConfigError(
                f"wandb_mode={self.wandb_mode!r}: use online, offline or disabled, or leave it unset to use WANDB_MODE."
            )
        if not self.tensorboard_prefix:
            raise ConfigError("tensorboard_prefix is empty: give a tag prefix such as 'eval'.")
        if not self.output_dir:
            raise ConfigError("TrackingConfig.output_dir is empty: set it to a folder for the results.")

    def build(self, tensorboard_writer: Any = None, wandb_run: Any = None) -> LoggerContainer:
        """The loggers this config asks for. Pass the trainer's `SummaryWriter` / W&B run to log
        next to the training loss instead of opening new ones."""
        loggers: list[EvaluationLogger] = []
        if "json" in self.loggers:
            loggers.append(ResultsJsonLogger(Path(self.output_dir)))
        if "details" in self.loggers:
            loggers.append(DetailsParquetLogger(Path(self.output_dir)))
        if "tensorboard" in self.loggers:
            if tensorboard_writer is not None:
                loggers.append(TensorBoardLogger(writer=tensorboard_writer, prefix=self.tensorboard_prefix))
            else:
                log_dir = self.tensorboard_dir or str(Path(self.output_dir) / "tensorboard")
                loggers.append(TensorBoardLogger(log_dir=log_dir, prefix=self.tensorboard_prefix))
        if "wandb" in self.loggers:
            from lighteval_nanotron.tracking.wandb_logger import WandbLogger

            loggers.append(
                WandbLogger(
                    project=self.wandb_project,
                    entity=self.wandb_entity,
                    mode=self.wandb_mode,
                    directory=self.wandb_dir,
                    run=wandb_run,
                )
            )
        return LoggerContainer(loggers)
