"""A data stage's loader for current Nanotron's trainer (GitHub main) that counts what it consumed.

Main's `TrainingMetadata` (serialize/metadata.py:65-67, checked whenever a checkpoint is loaded)
asserts that its `consumed_tokens_total` equals the tokens its stages' datasets say they consumed.
The trainer adds every step to the total (trainer.py:585) but takes the per-stage count from
`loader.dataset.get_consumption_stats()` only (trainer.py:575-581), which main's Nanoset datasets
have and a plain generator (main's own `dummy_infinite_data_generator`, our synthetic stream) has
not: such a run saves checkpoints whose metadata main refuses to resume from. `StageLoader` gives
any batch iterator that interface, counting from what the checkpoint recorded for its stage.

    loaders = {stage.name: StageLoader(batches, stage.name, trainer.metadata) for stage in config.data_stages}
"""

from __future__ import annotations

from typing import Any, Iterator

SOURCE = "synthetic"
"""The name under which a synthetic stage's tokens are recorded (main records one count per dataset
folder; a dataset stage records under its dataset's name)."""


class StageConsumption:
    """The `dataset` main's trainer asks a stage loader for: tokens consumed in this stage."""

    def __init__(self, tokens: int, source: str = SOURCE) -> None:
        self.tokens = tokens
        self.source = source

    def update_consumption_metrics(self, start_idx: int, end_idx: int, sequence_length: int) -> None:
        """The trainer's call after each step: samples [start_idx, end_idx) of `sequence_length` tokens."""
        self.tokens += (end_idx - start_idx) * sequence_length

    def get_consumption_stats(self) -> dict[str, dict[str, int]]:
        return {self.source: {"tokens": self.tokens}}


class StageLoader:
    """`batches` as the loader of the data stage `stage_name`, with its token count (recorded under
    `source`) in `dataset`."""

    def __init__(self, batches: Iterator[Any], stage_name: str, metadata: Any, source: str = SOURCE) -> None:
        self._batches = batches
        recorded = next((stage for stage in metadata.data_stages or [] if stage.name == stage_name), None)
        done = recorded.consumed_tokens_per_dataset_folder.get(source, 0) if recorded is not None else 0
        self.dataset = StageConsumption(int(done), source)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._batches)
