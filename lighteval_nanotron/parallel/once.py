"""Compute something once and give it to every rank: a setup step (loading datasets, building
prompts, tokenizing docs) that would otherwise run on every process of the world at once.

    docs = computed_once(load_docs, world_group, src=reporting_world_rank)

`fn` runs on `src` only; its result is pickled and broadcast over `group`. If it raises there,
the exception is broadcast instead and every rank raises it, so no rank waits in a collective.
`from_every_rank(value, group)` is the other direction: what each rank found, on every rank.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import EvaluationError

T = TypeVar("T")


def _picklable(outcome: tuple[bool, Any]) -> tuple[bool, Any]:
    ok, value = outcome
    try:
        pickle.dumps(value)
    except Exception as error:  # noqa: BLE001 - becomes the outcome every rank raises
        what = "result" if ok else f"error ({type(value).__name__}: {value})"
        return False, EvaluationError(f"Cannot send the {what} to the other ranks: {type(error).__name__}: {error}")
    return outcome


def computed_once(fn: Callable[[], T], group: Any = None, src: int = 0) -> T:
    """`fn()` computed on global rank `src` of `group` (default: the world) and broadcast to the others.

    A world of one (or no process group) just calls `fn`."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return fn()
    mine: BaseException | None = None
    holder: list[Any] = [None]
    if dist.get_rank() == src:
        try:
            outcome: tuple[bool, Any] = (True, fn())
        except Exception as error:  # noqa: BLE001 - broadcast, then raised on every rank
            mine, outcome = error, (False, error)
        holder = [_picklable(outcome)]
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else None
    dist.broadcast_object_list(holder, src=src, group=group, device=device)
    ok, value = holder[0]
    if ok:
        return value
    if mine is not None and holder[0][1] is mine:
        raise mine  # the source raises its own exception, traceback included
    raise value from mine


def from_every_rank(value: T, group: Any = None) -> list[T]:
    """Every rank's `value`, in the group's rank order, on every rank of `group` (one all-gather).
    A world of one (or no process group) gives `[value]`."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, value, group=group)
    return gathered
