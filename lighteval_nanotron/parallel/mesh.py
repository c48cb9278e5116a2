"""A read-only view of a Nanotron `ParallelContext`: who this process is in the TP x PP x DP mesh.

Only this adapter (and the other modules of `lighteval_nanotron.parallel`) touch process groups;
the engine asks it questions ("am I the output stage?") and hands it objects to gather.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist


@dataclass
class GatherRecord:
    """Bytes of the results gathers inside `record_gather_bytes()`, as this rank sees them:
    `sent` (its pickled payload, times the ranks that receive it) and `received`."""

    sent: int = 0
    received: int = 0
    gathers: int = 0
    payload_sizes: list[int] = field(default_factory=list)


_RECORDS: list[GatherRecord] = []


@contextlib.contextmanager
def record_gather_bytes() -> Iterator[GatherRecord]:
    """Measure what `Mesh.gather` moves on this rank inside the block (benchmarks; one extra pickle)."""
    record = GatherRecord()
    _RECORDS.append(record)
    try:
        yield record
    finally:
        _RECORDS.remove(record)


def _observe(payload: Any, gathered: list[Any] | None, receivers: int, my_world_rank: int) -> None:
    if not _RECORDS:
        return
    size = len(pickle.dumps(payload))
    received = 0
    if gathered is not None:
        received = sum(len(pickle.dumps(part)) for rank, part in enumerate(gathered) if rank != my_world_rank)
    for record in _RECORDS:
        record.sent += size * receivers
        record.received += received
        record.gathers += 1
        record.payload_sizes.append(size)


@dataclass(frozen=True)
class Mesh:
    """Ranks and groups of this process. `output_pp_rank` is the stage that holds the logits."""

    parallel_context: Any
    output_pp_rank: int
    input_pp_rank: int

    @property
    def tp_group(self):
        return self.parallel_context.tp_pg

    @property
    def pp_group(self):
        return self.parallel_context.pp_pg

    @property
    def world_group(self):
        return self.parallel_context.world_pg

    @property
    def tp_size(self) -> int:
        return self.parallel_context.tensor_parallel_size

    @property
    def pp_size(self) -> int:
        return self.parallel_context.pipeline_parallel_size

    @property
    def dp_size(self) -> int:
        return self.parallel_context.data_parallel_size

    @property
    def tp_rank(self) -> int:
        return dist.get_rank(self.parallel_context.tp_pg)

    @property
    def pp_rank(self) -> int:
        return dist.get_rank(self.parallel_context.pp_pg)

    @property
    def dp_rank(self) -> int:
        return dist.get_rank(self.parallel_context.dp_pg)

    @property
    def world_rank(self) -> int:
        return dist.get_rank(self.parallel_context.world_pg)

    @property
    def is_output_stage(self) -> bool:
        return self.pp_rank == self.output_pp_rank

    @property
    def is_input_stage(self) -> bool:
        return self.pp_rank == self.input_pp_rank

    @property
    def holds_results(self) -> bool:
        """TP rank 0 of the output stage of each replica: the ranks whose results are gathered."""
        return self.is_output_stage and self.tp_rank == 0

    @property
    def reporting_world_rank(self) -> int:
        """World rank of DP 0 / TP 0 of the output stage: where results land with `gather_to="reporting"`."""
        matrix = self.parallel_context.world_rank_matrix  # [ep, pp, dp, tp] (0.4), [ep, pp, dp, cp, tp] (main)
        return int(matrix[(0, self.output_pp_rank) + (0,) * (matrix.ndim - 2)])

    @property
    def is_reporting_rank(self) -> bool:
        return self.world_rank == self.reporting_world_rank

    def pp_global_rank(self, pp_rank: int) -> int:
        """Global rank of the process at pipeline rank `pp_rank` in this process's PP group."""
        return dist.get_global_rank(self.pp_group, pp_rank)

    def gather(self, payload: Any, to_all: bool) -> list[Any] | None:
        """One object collective over the world group: every rank's payload, on every rank
        (`to_all`) or on the reporting rank only (None elsewhere). Send only what this rank
        computed (a sparse payload; None from ranks that hold no result)."""
        world = self.world_group
        size = dist.get_world_size(world)
        me = self.world_rank
        if to_all:
            out: list[Any] = [None] * size
            dist.all_gather_object(out, payload, group=world)
            _observe(payload, out, size - 1, me)
            return out
        dst = self.reporting_world_rank
        out = [None] * size if me == dst else None
        dist.gather_object(payload, out, dst=dist.get_global_rank(world, dst), group=world)
        _observe(payload, out, 0 if me == dst else 1, me)
        return out
