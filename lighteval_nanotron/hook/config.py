"""The `lighteval_nanotron:` section of a Nanotron training YAML: `EvaluationOptions` (what to
evaluate, where results go; shared with `eval`) plus when to evaluate during training.

Every check runs in `__post_init__`, so a bad section fails when the trainer reads its config, on
every rank, before the model is even built. The keys are flat: `tasks`, `eval_interval`,
`loggers`, ... (docs/options.md lists them all).
"""

from dataclasses import dataclass
from typing import Optional

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options import EvaluationOptions

SECTION = "lighteval_nanotron"


@dataclass(kw_only=True)
class EvaluationConfig(EvaluationOptions):
    """When to evaluate during training. The section's other keys are the shared options."""

    eval_interval: Optional[int] = None
    """Evaluate after every `eval_interval` training steps (steps divisible by it)."""

    eval_at_checkpoints: bool = False
    """Evaluate right after each checkpoint the trainer saves (`checkpoints.checkpoint_interval`)."""

    eval_at_start: bool = False
    """Evaluate once before the first training step (step 0, or the resumed step)."""

    eval_at_end: bool = True
    """Evaluate once after the last training step (skipped when that step was just evaluated)."""

    stop_on_failure: bool = False
    """Stop training when an evaluation fails. Default: log the failure and keep training."""

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
