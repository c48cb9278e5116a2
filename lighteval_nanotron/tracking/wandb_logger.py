"""Weights & Biases: logs into the active run when training already has one, else opens one.

Evaluation rows carry their own x-axis: `train/step` (the training step, also under Nanotron's
`iteration_step` key) and `train/consumed_tokens`, declared with `define_metric` so that every
`eval/*` scalar is plotted against the training step, whatever W&B's own row counter says
(Nanotron logs its training scalars without an explicit step, so that counter is not the step).

`wandb` is imported only when this logger is built, so it stays an optional dependency. Offline
mode (`mode="offline"` or `WANDB_MODE=offline`) writes the run locally for a later `wandb sync`.
"""

from __future__ import annotations

from typing import Any

from lighteval_nanotron.errors import ConfigError, TrackingError
from lighteval_nanotron.options import TrackingOptions
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.scalars import result_scalars

STEP_KEY = "train/step"
TOKENS_KEY = "train/consumed_tokens"
NANOTRON_STEP_KEY = "iteration_step"
"""The key Nanotron logs its training scalars (`lm_loss`, ...) with: evaluation rows carry it too, so
that one chart with it as x-axis holds the loss and the evaluation metrics, in one run or across the
runs of a group (the asynchronous evaluations')."""


def import_wandb() -> Any:
    """The `wandb` module, or a `ConfigError` saying how to install it."""
    try:
        import wandb
    except ImportError as error:
        raise ConfigError(
            "W&B logging is enabled but `wandb` is not installed: `pip install wandb` "
            "(or `pip install lighteval-nanotron[wandb]`), or turn W&B logging off."
        ) from error
    return wandb


def open_run(
    options: TrackingOptions,
    project: str | None = None,
    name: str | None = None,
    group: str | None = None,
    config: Any = None,
) -> Any:
    """A new W&B run with the options' W&B settings; `project`, `name` and `group` apply where the
    options leave them unset (the hook: the training's project and run), `config` is recorded with
    it. A run W&B cannot open (no API key, no network, an unwritable `dir`) is a TrackingError in one
    line saying the ways out, instead of W&B's own exception."""
    wandb = import_wandb()
    try:
        return wandb.init(
            project=options.wandb_project or project,
            name=options.wandb_run_name or name,
            entity=options.wandb_entity,
            group=options.wandb_group or group,
            tags=options.wandb_tags,
            id=options.wandb_run_id,
            resume="allow" if options.wandb_run_id else None,
            mode=options.wandb_mode,
            dir=options.wandb_dir,
            config=config,
        )
    except Exception as error:  # noqa: BLE001 - W&B raises many types; each becomes one actionable error
        raise TrackingError(
            f"W&B could not open a run ({type(error).__name__}: {' '.join(str(error).split())}): log in "
            "(`wandb login` or WANDB_API_KEY), use W&B's offline mode (wandb_mode: offline, or WANDB_MODE=offline; "
            "`wandb sync` later), or remove `wandb` from the loggers."
        ) from error


class WandbLogger(EvaluationLogger):
    """Logs `eval/<task>/<metric>` (and `eval_time/<task>`) with `train/step` and
    `train/consumed_tokens` in the same row, `eval/*` and `eval_time/*` being declared against
    `train/step` (and `train/consumed_tokens` available as x-axis)."""

    def __init__(self, options: TrackingOptions, run: Any = None, prefix: str = "eval") -> None:
        """Logs into `run`, else W&B's active run, else a new run (`open_run`) that it finishes on `close`."""
        self._owns_run = False
        if run is None:
            run = import_wandb().run
        if run is None:
            run = open_run(options)
            self._owns_run = True
        self.run = run
        self.prefix = prefix
        run.define_metric(STEP_KEY)
        run.define_metric(TOKENS_KEY, step_metric=STEP_KEY)
        run.define_metric(f"{prefix}/*", step_metric=STEP_KEY)
        run.define_metric(f"{prefix}_time/*", step_metric=STEP_KEY)  # each task's seconds
        run.define_metric(f"{prefix}_signal/*", step_metric=STEP_KEY)  # the signal across the run

    def log(self, result: EvaluationResult) -> None:
        row = result_scalars(result, self.prefix)
        if result.step is not None:
            row[STEP_KEY] = row[NANOTRON_STEP_KEY] = result.step
        if result.consumed_tokens is not None:
            row[TOKENS_KEY] = result.consumed_tokens
        self.run.log(row)

    def close(self) -> None:
        if self._owns_run:
            self.run.finish()
            self._owns_run = False
