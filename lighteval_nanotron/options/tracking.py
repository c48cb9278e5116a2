"""Where results go: the loggers and their settings, for the hook, `eval` and `TrackingConfig`."""

from dataclasses import dataclass, field
from typing import List, Optional, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options.base import Options, as_list, choices, path

LOGGER_NAMES = ("json", "details", "tensorboard", "wandb", "log")
DEFAULT_LOGGERS = ("json", "details", "tensorboard", "log")
WANDB_MODES = ("online", "offline", "disabled")


@dataclass(kw_only=True)
class TrackingOptions(Options):
    """Where results go."""

    output_dir: str = field(default="eval_results", metadata=path())
    """Folder of the results JSON (`results/<model>/<step>/`), the details Parquet files
    (`details/`) and the TensorBoard events (`tensorboard/`)."""

    loggers: List[str] = field(default_factory=lambda: list(DEFAULT_LOGGERS), metadata=choices(LOGGER_NAMES))
    """Where results go: any of `json` (results file), `details` (per-sample Parquet),
    `tensorboard`, `wandb`, `log` (the results table in the log: Nanotron's log on world rank 0
    in the hook; `eval` prints the table on stdout in any case)."""

    tensorboard_prefix: str = "eval"
    """TensorBoard tags are `<prefix>/<task>/<metric>` (lighteval's `tensorboard_metric_prefix`)."""

    wandb_project: Optional[str] = None
    """W&B project, when `wandb` is among the loggers. Unset: the hook takes the training config's
    `general.project`, `eval` `$WANDB_PROJECT`."""

    wandb_entity: Optional[str] = None
    """W&B entity (team or user). Unset: your default entity."""

    wandb_run_name: Optional[str] = None
    """W&B run name. Unset: the hook names it `<general.project>_<general.run>`, `eval` leaves it to W&B."""

    wandb_run_id: Optional[str] = None
    """W&B run id: set it to resume that run (after a restart, or a backfill into the training's run)."""

    wandb_group: Optional[str] = None
    """W&B run group (e.g. one per sweep)."""

    wandb_tags: Optional[Union[str, List[str]]] = None
    """W&B run tags, a list or a comma-separated string."""

    wandb_mode: Optional[str] = field(default=None, metadata=choices(WANDB_MODES))
    """W&B mode: `online`, `offline` (files for a later `wandb sync`) or `disabled`. Unset:
    `$WANDB_MODE`, else online."""

    wandb_dir: Optional[str] = field(default=None, metadata=path())
    """Folder of W&B's local files. Unset: W&B's default (`./wandb`)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # an empty output_dir is refused there, as every empty path option
        unknown = [name for name in self.loggers if name not in LOGGER_NAMES]
        if unknown:
            raise ConfigError(
                f"{self.named('loggers')} has unknown logger(s) {unknown}: use a subset of {list(LOGGER_NAMES)}."
            )
        if len(set(self.loggers)) != len(self.loggers):
            raise ConfigError(f"{self.named('loggers')} lists a logger twice ({self.loggers}): list each once.")
        if not self.tensorboard_prefix:
            raise ConfigError(f"{self.named('tensorboard_prefix')} is empty: give a tag prefix such as 'eval'.")
        if self.wandb_tags is not None:
            self.wandb_tags = as_list(self.wandb_tags)
