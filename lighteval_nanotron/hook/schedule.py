"""When to evaluate: a pure function of the training step and the moment in the training loop."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Set

from lighteval_nanotron.options.hook import EvaluationConfig


class Moment(str, Enum):
    """The places in Nanotron's training loop where the hook can evaluate."""

    START = "start"
    STEP = "step"
    CHECKPOINT = "checkpoint"
    END = "end"


@dataclass
class EvalSchedule:
    """Decides whether a (moment, step) pair is an evaluation point; never the same step twice."""

    eval_interval: Optional[int] = None
    eval_at_checkpoints: bool = False
    eval_at_start: bool = False
    eval_at_end: bool = True
    seen_steps: Set[int] = field(default_factory=set)

    @classmethod
    def from_config(cls, config: EvaluationConfig) -> "EvalSchedule":
        return cls(
            eval_interval=config.eval_interval,
            eval_at_checkpoints=config.eval_at_checkpoints,
            eval_at_start=config.eval_at_start,
            eval_at_end=config.eval_at_end,
        )

    def wants(self, moment: Moment, step: int) -> bool:
        """True when `step` at `moment` is configured and not evaluated yet (does not record it)."""
        if step in self.seen_steps:
            return False
        if moment is Moment.START:
            return self.eval_at_start
        if moment is Moment.STEP:
            return self.eval_interval is not None and step > 0 and step % self.eval_interval == 0
        if moment is Moment.CHECKPOINT:
            return self.eval_at_checkpoints and step > 0
        return self.eval_at_end

    def mark(self, step: int) -> None:
        """Record that `step` was evaluated (or found already evaluated)."""
        self.seen_steps.add(step)

    def planned_steps(self, start_step: int, train_steps: int, checkpoint_interval: Optional[int]) -> list[int]:
        """Every step a run from `start_step` to `train_steps` evaluates, in order (for logs and tests)."""
        steps = []
        if self.eval_at_start:
            steps.append(start_step)
        for step in range(start_step + 1, train_steps + 1):
            on_interval = self.eval_interval is not None and step % self.eval_interval == 0
            on_checkpoint = self.eval_at_checkpoints and checkpoint_interval and step % checkpoint_interval == 0
            if on_interval or on_checkpoint:
                steps.append(step)
        if self.eval_at_end and (not steps or steps[-1] != train_steps):
            steps.append(train_steps)
        return steps
