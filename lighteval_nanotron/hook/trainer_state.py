"""The training counters the hook reads from a Nanotron `DistributedTrainer`: 0.4 keeps them on the
trainer, current Nanotron (GitHub main) in `trainer.metadata` (a `TrainingMetadata`)."""

from __future__ import annotations

from typing import Any

from lighteval_nanotron.nanotron_compat.variant import installed_nanotron


def consumed_train_samples(trainer: Any) -> int:
    """Samples trained on so far (all DP replicas)."""
    if installed_nanotron().name == "main":
        return int(trainer.metadata.consumed_train_samples)
    return int(trainer.consumed_train_samples)


def start_step(trainer: Any) -> int:
    """The step training resumes from (0 for a fresh run)."""
    if installed_nanotron().name == "main":
        initial = getattr(trainer, "initial_iter_step", None)  # set by `train()` before `pre_training`
        return int(initial - 1) if initial is not None else int(trainer.metadata.last_train_step)
    return int(trainer.start_iteration_step)
