"""The `lighteval_nanotron:` section of a Nanotron training YAML: `EvaluationOptions` (what to
evaluate, where results go; shared with `eval`) plus when to evaluate during training.

Every check runs in `__post_init__`, so a bad section fails when the trainer reads its config, on
every rank, before the model is even built. The keys are flat: `tasks`, `eval_interval`,
`loggers`, ... (docs/options.md lists them all).
"""

from dataclasses import dataclass, field
from typing import Optional

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.options.base import path
from lighteval_nanotron.options.launch import AsyncEvaluationConfig

SECTION = "lighteval_nanotron"


@dataclass(kw_only=True)
class EvaluationConfig(EvaluationOptions):
    """When to evaluate during training. The section's other keys are the shared options."""

    eval_interval: Optional[int] = None
    """Evaluate after every `eval_interval` training steps (steps divisible by it). With
    `asynchronous`: the checkpoints at those steps (a multiple of `checkpoint_interval`)."""

    eval_interval_file: Optional[str] = field(default=None, metadata=path())
    """With `asynchronous`: a file holding a new `eval_interval`, read at each checkpoint save
    (Nanotron's `lighteval.eval_interval_file`); a value that is not a positive multiple of
    `checkpoint_interval` is logged and ignored."""

    eval_at_checkpoints: bool = False
    """Evaluate right after each checkpoint the trainer saves (`checkpoints.checkpoint_interval`)."""

    eval_at_start: bool = False
    """Evaluate once before the first training step (step 0, or the resumed step)."""

    eval_at_end: bool = True
    """Evaluate once after the last training step (skipped when that step was just evaluated)."""

    stop_on_failure: bool = False
    """Stop training when an evaluation fails. Default: log the failure and keep training."""

    asynchronous: Optional[AsyncEvaluationConfig] = None
    """Evaluate each saved checkpoint in its own processes (a local process group or a Slurm job)
    while training goes on, instead of in the loop: docs/hook.md, "Asynchronous evaluation"."""

    def named(self, option: str) -> str:
        return f"{SECTION}.{option}"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_positive("eval_interval", "(a number of training steps) or remove it")
        if not (self.eval_interval or self.eval_at_checkpoints or self.eval_at_start or self.eval_at_end):
            raise ConfigError(
                f"{SECTION} never evaluates: set eval_interval, or one of eval_at_checkpoints, "
                "eval_at_start, eval_at_end to true."
            )
        if self.asynchronous is not None:
            self._check_asynchronous()
        elif self.eval_interval_file is not None:
            raise ConfigError(
                f"{self.named('eval_interval_file')} needs asynchronous evaluation (the asynchronous: section): "
                "set eval_interval instead, or add asynchronous."
            )

    def _check_asynchronous(self) -> None:
        """What an evaluation launched from a saved checkpoint cannot do."""
        if self.eval_at_start:
            raise ConfigError(
                f"{self.named('eval_at_start')} with asynchronous: no checkpoint is saved before the first step; "
                "remove eval_at_start (evaluate an initial checkpoint with `lighteval-nanotron eval`)."
            )
        if self.stop_on_failure:
            raise ConfigError(
                f"{self.named('stop_on_failure')} with asynchronous: a launched evaluation never stops training "
                "(failures are recorded and logged); remove stop_on_failure."
            )
        if not [name for name in self.loggers if name != "log"]:
            raise ConfigError(
                f"{self.named('loggers')} with asynchronous: the launched evaluation writes files; list json "
                "(and details, tensorboard or wandb) besides log."
            )

    def check_against_training(self, train_steps: int, checkpoint_interval: Optional[int]) -> None:
        """Checks that need the rest of the training config."""
        if self.eval_interval is not None and self.eval_interval > train_steps:
            raise ConfigError(
                f"{self.named('eval_interval')}={self.eval_interval} is larger than "
                f"tokens.train_steps={train_steps}, so it never fires: lower it or use eval_at_end."
            )
        if self.eval_at_checkpoints and checkpoint_interval is None:
            raise ConfigError(
                f"{self.named('eval_at_checkpoints')} is true but the training config has no "
                "checkpoints section: add one or use eval_interval."
            )
        if self.asynchronous is None:
            return
        if checkpoint_interval is None:
            raise ConfigError(
                f"{self.named('asynchronous')} evaluates saved checkpoints but the training config has no "
                "checkpoints section: add one (checkpoints.checkpoint_interval)."
            )
        if self.eval_interval is not None and self.eval_interval % checkpoint_interval:
            raise ConfigError(
                f"{self.named('eval_interval')}={self.eval_interval} with asynchronous: only steps with a "
                f"checkpoint can be evaluated: use a multiple of checkpoints.checkpoint_interval={checkpoint_interval}."
            )
