"""Bound every wait an evaluation makes on its peers by one deadline, so a stalled rank (stopped,
swapped out, stuck in I/O) turns into an error on the live ranks instead of a hang.

Measured on gloo (torch 2.13, two processes, one SIGSTOPped): a collective (all_reduce,
all_gather_object, broadcast) raises `RuntimeError: Timed out waiting ...` after the group's
timeout, which `torch.distributed`'s `_set_pg_timeout` changes on a live group; a point-to-point
`irecv(...).wait()` ignores that timeout and waits forever, but `wait(timeout=...)` is bounded.
So `bounded_collectives` sets the timeout of every group of a `ParallelContext` for its block
(restoring the previous ones after) and `wait(work)` gives every P2P wait the same bound. After a
timeout the group is broken (its next operation fails at once): the evaluation cannot go on with
the stalled peer, and neither can training; the callers raise `EvaluationError`.

    with bounded_collectives(parallel_context, timeout_s=60):
        result = pipeline.run(step=step)
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

_current: datetime.timedelta | None = None

TIMEOUT_MARKERS = ("Timed out", "timed out", "Timeout", "timeout")


def _groups(parallel_context: Any) -> list[Any]:
    """Every distinct process group of a Nanotron `ParallelContext` this rank belongs to."""
    found = [getattr(parallel_context, name, None) for name in ("world_pg", "tp_pg", "pp_pg", "dp_pg", "mp_pg")]
    found += list(getattr(parallel_context, "world_ranks_to_pg", {}).values())
    unique: dict[int, Any] = {}
    for group in found:
        if group is not None and group != dist.GroupMember.NON_GROUP_MEMBER:
            unique.setdefault(id(group), group)
    return list(unique.values())


def _timeout_of(group: Any) -> datetime.timedelta | None:
    for device in (torch.device("cpu"), torch.device("cuda")):
        try:
            return group._get_backend(device).options._timeout
        except (RuntimeError, AttributeError, ValueError):
            continue
    return None


@contextlib.contextmanager
def bounded_collectives(parallel_context: Any, timeout_s: float) -> Iterator[None]:
    """Within the block, every collective on the context's groups and every P2P wait through
    `wait` raises after `timeout_s` seconds without the peers (instead of blocking)."""
    global _current
    from torch.distributed.distributed_c10d import _set_pg_timeout

    timeout = datetime.timedelta(seconds=timeout_s)
    groups = _groups(parallel_context)
    previous = [(group, _timeout_of(group)) for group in groups]
    outer, _current = _current, timeout
    for group in groups:
        _set_pg_timeout(timeout, group)
    try:
        yield
    finally:
        _current = outer
        for group, value in previous:
            if value is not None:
                with contextlib.suppress(RuntimeError, ValueError):
                    _set_pg_timeout(value, group)


def current_timeout_s() -> float | None:
    """The deadline of the enclosing `bounded_collectives` block in seconds (None outside one)."""
    return None if _current is None else _current.total_seconds()


def deadline_s(group: Any) -> float:
    """How long a wait on `group`'s peers may take: the enclosing `bounded_collectives` block's
    deadline, else the group's own timeout (torch's default when it does not say)."""
    if _current is not None:
        return _current.total_seconds()
    timeout = _timeout_of(group) or dist.default_pg_timeout
    return timeout.total_seconds()


def wait(work: Any) -> None:
    """`work.wait()`, bounded by the deadline of the enclosing `bounded_collectives` block."""
    if _current is None:
        work.wait()
    else:
        work.wait(timeout=_current)


def is_timeout(error: BaseException) -> bool:
    """Whether `error` is a process-group timeout (a peer did not answer in time)."""
    return isinstance(error, RuntimeError) and any(marker in str(error) for marker in TIMEOUT_MARKERS)
