"""The sizes of the device check: the same steps at the GPU machine's sizes or the dry run's toy ones."""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Profile:
    """The sizes of one kind of run: the same steps at the GPU's sizes or the dry run's."""

    shape: str
    """Random model of the evaluations and the training (device_check/models.py SHAPES)."""
    bench_shapes: tuple[str, ...]
    """Shapes whose figures are measured."""
    max_samples: int
    """Docs per task of the compared evaluations."""
    cpu_threads: int
    """Threads of the CPU reference process."""
    sequence_length: int
    micro_batch_size: int
    train_steps: int
    suite_samples: int
    """Docs per task of the standard suite the hook evaluates in the training."""
    memory_budget_gb: float | None
    """`memory_budget_gb` of the memory step's evaluations: None on CUDA (the free memory cuts their
    micro-batches); on CPU, whose free memory the engine does not probe, a budget that does."""
    bench_scale: float
    peak_size: int
    peak_repeats: int


PROFILES = {
    "gpu": Profile(
        shape="smollm2",
        bench_shapes=("smollm2", "llama-1b"),
        max_samples=24,
        cpu_threads=max(1, (os.cpu_count() or 1) - 2),  # the device process runs beside it
        sequence_length=2048,
        micro_batch_size=8,
        train_steps=8,
        suite_samples=500,
        memory_budget_gb=None,
        bench_scale=1.0,
        peak_size=8192,
        peak_repeats=30,
    ),
    "dry": Profile(
        shape="smollm2-mini",
        bench_shapes=("smollm2-mini",),
        max_samples=2,
        cpu_threads=1,
        sequence_length=32,
        micro_batch_size=2,
        train_steps=4,
        suite_samples=2,
        memory_budget_gb=0.01,  # about 400 tokens of the dry shape in bf16
        bench_scale=0.01,
        peak_size=256,
        peak_repeats=5,
    ),
}
