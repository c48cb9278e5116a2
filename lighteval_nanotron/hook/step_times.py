"""How long training steps take, to state an evaluation's cost in training steps.

Nanotron stamps `trainer.iteration_start_time` (`time.time()`) when an iteration starts and
calls `post_train_step` at the end of its `training_step`, before logging, checkpointing or our
evaluation: the difference is the step's own time. Current Nanotron (GitHub main) has no such
stamp (it times iterations with its own timers): there a step's time is measured from the end
of the hook's previous call (`step_ended`) to this `post_train_step`, so it also holds Nanotron's
logging and checkpointing of the previous step, never an evaluation. The first step
(compilation, allocator and data-loader warm-up) is left out of the mean once there is another.

On a GPU `post_train_step` runs when the step's kernels are queued, not done (Nanotron synchronises
only later, in its step logs): the device is synchronised before the step's end is read, so a step
is its own time, and not its forward alone while its backward and optimizer step run on into the
next step or into the evaluation.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import torch


def _device_settled() -> None:
    """Wait for the work queued on the CUDA device, if this process has used one."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepTimes:
    """Seconds of each training step seen by `post_train_step`, in order."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._last_end: Optional[float] = None

    def record(self, trainer: Any) -> None:
        started = getattr(trainer, "iteration_start_time", None)
        if not isinstance(started, (int, float)):
            started = self._last_end
        if started is not None:
            _device_settled()
            self.seconds.append(time.time() - float(started))

    def step_ended(self) -> None:
        """The hook's work after a step (or a checkpoint) is done: the next step starts its clock."""
        self._last_end = time.time()

    @property
    def mean_s(self) -> Optional[float]:
        """Mean seconds per training step (None before the first step)."""
        steady = self.seconds[1:] or self.seconds
        return sum(steady) / len(steady) if steady else None

    def in_steps(self, seconds: float) -> Optional[float]:
        """`seconds` as a number of training steps (None before the first step)."""
        mean = self.mean_s
        return seconds / mean if mean else None
