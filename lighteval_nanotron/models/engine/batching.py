"""Deterministic work split and token-budget batching, identical on every rank.

Items (scoring rows or generation requests) expose `token_length` (padded cost per row). They are
assigned to data-parallel replicas by the data layer (`GenDistributedSampler`'s token-balanced
split: longest first, each to the replica with the fewest tokens so far), then cut into
micro-batches under a token budget.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from lighteval_nanotron.models.engine.data import DynamicBatchDataset, GenDistributedSampler


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


def replica_items(
    dataset: DynamicBatchDataset, dp_size: int, dp_rank: int, sort: bool, assignment: Sequence[int] | None = None
) -> list[Any]:
    """This replica's requests: its token-balanced share (`GenDistributedSampler`, or `assignment`:
    the replica of each request), in the dataset's sorted order (`sort`) or in input order."""
    sampler = GenDistributedSampler(
        dataset, dp_size, dp_rank, shuffle=False, split="token_balanced", assignment=assignment
    )
    positions = list(sampler)
    if not sort:
        positions.sort(key=lambda position: dataset.original_order[position])
    return [_request(dataset[position]) for position in positions]


def _request(item: Any) -> Any:
    """A dataset item's request (`GenerativeTaskDatasetNanotron` items are `(index, request)`)."""
    return item[1] if isinstance(item, tuple) else item


def batch_budget(costs: Sequence[int], max_tokens: int, min_batches: int) -> int:
    """Token budget giving at least `min_batches` micro-batches when there is enough work (so
    pipeline stages have micro-batches to overlap), never above `max_tokens`."""
    if min_batches <= 1:
        return max_tokens
    return max(1, min(max_tokens, -(-sum(costs) // min_batches)))
