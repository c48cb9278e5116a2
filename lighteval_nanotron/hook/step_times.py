"""How long training steps take, to state an evaluation's cost in training steps.

Nanotron stamps `trainer.iteration_start_time` (`time.time()`) when an iteration starts and
calls `post_train_step` at the end of its `training_step`, before logging, checkpointing or our
evaluation: the difference is the step's own time. The first step (compilation, allocator and
data-loader warm-up) is left out of the mean once there is another.
"""

from __future__ import annotations

import time
from typing import Any, Optional


class StepTimes:
    """Seconds of each training step seen by `post_train_step`, in order."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def record(self, trainer: Any) -> None:
        started = getattr(trainer, "iteration_start_time", None)
        if isinstance(started, (int, float)):
            self.seconds.append(time.time() - float(started))

    @property
    def mean_s(self) -> Optional[float]:
        """Mean seconds per training step (None before the first step)."""
        steady = self.seconds[1:] or self.seconds
        return sum(steady) / len(steady) if steady else None

    def in_steps(self, seconds: float) -> Optional[float]:
        """`seconds` as a number of training steps (None before the first step)."""
        mean = self.mean_s
        return seconds / mean if mean else None
