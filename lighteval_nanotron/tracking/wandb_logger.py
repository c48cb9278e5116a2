"""Weights & Biases: logs into the active run when training already has one, else opens one.

`wandb` is imported only when this logger is built, so it stays an optional dependency. Offline
mode (`mode="offline"` or `WANDB_MODE=offline`) writes the run locally for a later `wandb sync`.
"""

from __future__ import annotations

from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.base import EvaluationLogger
from lighteval_nanotron.tracking.scalars import result_scalars


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as error:
        raise ConfigError(
            "W&B logging is enabled but `wandb` is not installed: `pip install wandb` "
            "(or `pip install lighteval-nanotron[wandb]`), or turn W&B logging off."
        ) from error
    return wandb


class WandbLogger(EvaluationLogger):
    """Logs `eval/<task>/<metric>` at `step=result.step`.

    In a run it opened itself the row is committed at once; in the training run it is left open
    so that the trainer's own scalars of the same step join the same row.
    """

    def __init__(
        self,
        project: str | None = None,
        run_name: str | None = None,
        entity: str | None = None,
        mode: str | None = None,
        directory: str | None = None,
        run: Any = None,
        prefix: str = "eval",
    ) -> None:
        wandb = _import_wandb()
        self._owns_run = False
        if run is None:
            run = wandb.run
        if run is None:
            run = wandb.init(project=project, name=run_name, entity=entity, mode=mode, dir=directory, resume="allow")
            self._owns_run = True
        self.run = run
        self.prefix = prefix

    def log(self, result: EvaluationResult) -> None:
        scalars = result_scalars(result, self.prefix)
        if result.step is None:
            self.run.log(scalars)
        else:
            self.run.log(scalars, step=result.step, commit=True if self._owns_run else None)

    def close(self) -> None:
        if self._owns_run:
            self.run.finish()
            self._owns_run = False
