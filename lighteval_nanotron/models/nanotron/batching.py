"""Deterministic work split and token-budget batching, identical on every rank.

Items (scoring rows or generation requests) expose `token_length` (padded cost per row). They are
assigned to data-parallel replicas longest first, each to the replica with the fewest tokens so
far (ties: lowest replica), then cut into micro-batches under a token budget.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

from lighteval_nanotron.data import DynamicBatchDataset


def assign_replicas(lengths: Sequence[int], num_replicas: int) -> list[int]:
    """Replica of each item: longest-processing-time-first over token lengths (stable ties)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    heap = [(0, replica) for replica in range(num_replicas)]
    owner = [0] * len(lengths)
    for i in order:
        load, replica = heapq.heappop(heap)
        owner[i] = replica
        heapq.heappush(heap, (load + lengths[i], replica))
    return owner


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def cut_batches(
    items: Sequence[Any],
    cost: Callable[[Any], int],
    max_tokens: int,
    max_rows: int,
    fixed_width: int | None,
) -> list[list[Any]]:
    """Consecutive micro-batches whose rows x widest cost stays within `max_tokens` (a single
    over-budget item gets a batch of its own). `fixed_width` replaces the per-batch width."""
    batches: list[list[Any]] = []
    current: list[Any] = []
    width = 0
    for item in items:
        new_width = fixed_width or max(width, cost(item))
        if current and ((len(current) + 1) * new_width > max_tokens or len(current) >= max_rows):
            batches.append(current)
            current, new_width = [], fixed_width or cost(item)
        current.append(item)
        width = new_width
    if current:
        batches.append(current)
    return batches


def replica_order(dataset: DynamicBatchDataset, owner: Sequence[int], dp_rank: int, sort: bool) -> list[Any]:
    """This replica's items, in the dataset's sorted order (`sort`) or in input order."""
    if sort:
        return [item for item, index in zip(dataset.sorted_data, dataset.original_order) if owner[index] == dp_rank]
    items = dataset.get_original_order(dataset.sorted_data)
    return [item for index, item in enumerate(items) if owner[index] == dp_rank]


def batch_budget(costs: Sequence[int], max_tokens: int, min_batches: int) -> int:
    """Token budget giving at least `min_batches` micro-batches when there is enough work (so
    pipeline stages have micro-batches to overlap), never above `max_tokens`."""
    if min_batches <= 1:
        return max_tokens
    return max(1, min(max_tokens, -(-sum(costs) // min_batches)))
