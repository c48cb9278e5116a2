"""Make every rank reach the same verdict about a step that may have failed on some of them.

A failure flag is all-reduced (MAX) over the world group with a deadline: a rank that raised
reports 1, the others 0, and all of them learn the outcome together. Only when something failed
are the messages gathered, so that every rank can log which rank failed and why.

`collectively(world, what, fn)` runs one setup or evaluation stage that way on every rank: both
ways in (the hook and `eval`) go through it, so that a stage failing on one rank stops all.
"""

import datetime
import traceback
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple, TypeVar

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import EvaluationError, LightevalNanotronError
from lighteval_nanotron.parallel.deadline import current_timeout_s, is_timeout

T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    """What the ranks agreed on: the failures of every rank that failed (world rank, message)."""

    failures: Tuple[Tuple[int, str], ...] = ()

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    @property
    def out_of_memory(self) -> bool:
        """Every failure is an allocation that failed (CUDA's or the CPU allocator's): retrying
        with less memory may succeed."""
        return self.failed and all(is_out_of_memory(message) for _, message in self.failures)

    def describe(self) -> str:
        """One line: each distinct message once, after the world ranks that raised it."""
        ranks: dict = {}
        for rank, message in self.failures:
            ranks.setdefault(message, []).append(str(rank))
        return "; ".join(
            f"world rank{'s' if len(who) > 1 else ''} {', '.join(who)}: {message}" for message, who in ranks.items()
        )


OUT_OF_MEMORY_MARKERS = ("OutOfMemoryError", "out of memory", "can't allocate memory", "MemoryError")
"""In a `describe_exception` line: CUDA's `torch.cuda.OutOfMemoryError`, the CPU allocator's
`RuntimeError: ... DefaultCPUAllocator: can't allocate memory`, Python's `MemoryError`."""


def is_out_of_memory(message: str) -> bool:
    """Whether a `describe_exception` line is a failed allocation."""
    return any(marker in message for marker in OUT_OF_MEMORY_MARKERS)


def describe_exception(error: BaseException) -> str:
    """One line naming the exception, its message and where it was raised."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _flag_device(group: dist.ProcessGroup) -> torch.device:
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def agreed_minimum(values: List[int], group: dist.ProcessGroup) -> List[int]:
    """Collective: the element-wise minimum of every rank's `values` (the same list on every rank),
    so that a plan sized from a local measurement is the same on all of them."""
    tensor = torch.tensor(values, dtype=torch.int64, device=_flag_device(group))
    dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=group)
    return [int(value) for value in tensor.tolist()]


def agree(
    error: Optional[BaseException], group: dist.ProcessGroup, timeout_s: float, what: str, *, timeout_hint: str
) -> Verdict:
    """Collective: returns the same `Verdict` on every rank of `group`.

    Raises `EvaluationError` on the ranks that do not hear from every other rank within
    `timeout_s` (a rank stuck in a collective after a peer failed): continuing would hang. Its
    message names this rank's own failure, if any, and ends with `timeout_hint`, the caller's
    advice (e.g. which setting raises the deadline).
    """
    flag = torch.tensor([0 if error is None else 1], dtype=torch.int64, device=_flag_device(group))
    work = dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group, async_op=True)
    try:
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


def default_failure(what: str, verdict: Verdict, error: Optional[BaseException]) -> BaseException:
    """A rank re-raises its own library error (it names the fix); the others name the failing rank."""
    if isinstance(error, LightevalNanotronError):
        return error
    return EvaluationError(f"{what} failed: {verdict.describe()}")


def collectively(
    world: dist.ProcessGroup,
    what: str,
    fn: Callable[[], T],
    *,
    timeout_hint: str,
    timeout_s: Optional[float] = None,
    failure: Callable[[str, Verdict, Optional[BaseException]], BaseException] = default_failure,
) -> T:
    """`fn()` on every rank; if it raises on any rank, every rank raises `failure(what, verdict,
    its own error or None)` together: no rank is left waiting in a collective. The wait is
    `timeout_s`, else the deadline of the enclosing `bounded_collectives`. A peer that timed out is
    not waited for again (the group is broken): the rank raises an `EvaluationError` at once."""
    error: Optional[BaseException] = None
    value: Any = None
    try:
        value = fn()
    except Exception as caught:  # noqa: BLE001 - agreed on below, then raised on every rank
        error = caught
    timeout_s = timeout_s or current_timeout_s()
    if timeout_s is None:
        raise EvaluationError(f"{what}: no deadline; run it inside bounded_collectives or pass timeout_s.") from error
    if error is not None and is_timeout(error):
        raise EvaluationError(
            f"{what}: a peer rank did not answer within {timeout_s:.0f}s ({error}); it is stalled or dead, and the "
            f"process group cannot be used any more, so the evaluation stops. {timeout_hint}"
        ) from error
    verdict = agree(error, world, timeout_s, what, timeout_hint=timeout_hint)
    if not verdict.failed:
        return value
    raised = failure(what, verdict, error)
    if raised is error:
        raise error
    raise raised from error
