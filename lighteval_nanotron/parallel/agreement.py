"""Make every rank reach the same verdict about a step that may have failed on some of them.

A failure flag is all-reduced (MAX) over the world group with a deadline: a rank that raised
reports 1, the others 0, and all of them learn the outcome together. Only when something failed
are the messages gathered, so that every rank can log which rank failed and why.
"""

import datetime
import traceback
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import EvaluationError, LightevalNanotronError


@dataclass(frozen=True)
class Verdict:
    """What the ranks agreed on: the failures of every rank that failed (world rank, message)."""

    failures: Tuple[Tuple[int, str], ...] = ()

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def describe(self) -> str:
        return "; ".join(f"world rank {rank}: {message}" for rank, message in self.failures)


def describe_exception(error: BaseException) -> str:
    """One line naming the exception, its message and where it was raised."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _flag_device(group: dist.ProcessGroup) -> torch.device:
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def agree(
    error: Optional[BaseException],
    group: dist.ProcessGroup,
    timeout_s: Optional[float],
    what: str,
    *,
    timeout_hint: str,
) -> Verdict:
    """Collective: returns the same `Verdict` on every rank of `group`.

    Raises `EvaluationError` on the ranks that do not hear from every other rank within
    `timeout_s` (None: the group's own timeout; a rank stuck in a collective after a peer failed):
    continuing would hang. Its message names this rank's own failure, if any, and ends with
    `timeout_hint`, the caller's advice (e.g. which setting raises the deadline).
    """
    flag = torch.tensor([0 if error is None else 1], dtype=torch.int64, device=_flag_device(group))
    work = dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group, async_op=True)
    try:
        if timeout_s is None:
            work.wait()
        else:
            work.wait(timeout=datetime.timedelta(seconds=timeout_s))
    except RuntimeError as timeout:
        mine = "" if error is None else f" This rank failed: {describe_exception(error)}."
        raise EvaluationError(
            f"{what}: not every rank reported within {timeout_s}s ({timeout}); a rank is stuck or dead.{mine} "
            f"{timeout_hint}"
        ) from error
    if int(flag.item()) == 0:
        return Verdict()
    mine = (dist.get_rank(), describe_exception(error)) if error is not None else None
    gathered: List[Optional[Tuple[int, str]]] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, mine, group=group)
    return Verdict(tuple(item for item in gathered if item is not None))


def raise_together(
    error: Optional[BaseException],
    group: dist.ProcessGroup,
    timeout_s: Optional[float],
    what: str,
    *,
    timeout_hint: str,
) -> None:
    """Collective (`agree`): returns on every rank when no rank failed, else every rank raises: a
    rank that failed with one of this library's errors raises it, every other rank an
    `EvaluationError` naming each failing rank and its message."""
    verdict = agree(error, group, timeout_s, what, timeout_hint=timeout_hint)
    if not verdict.failed:
        return
    if isinstance(error, LightevalNanotronError):
        raise error
    raise EvaluationError(f"{what} failed: {verdict.describe()}") from error
