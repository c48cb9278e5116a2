"""Every rank learns that one rank failed, with its message, within a deadline."""

import time

import pytest
import torch
import torch.distributed as dist

from lighteval_nanotron.errors import EvaluationError
from lighteval_nanotron.parallel.agreement import agree
from tests.helpers.distributed import run_distributed

HINT = "Raise the caller's own timeout setting."


def _one_rank_fails(failing_rank: int):
    error = None
    if dist.get_rank() == failing_rank:
        try:
            raise ValueError("prompt function broke")
        except ValueError as caught:
            error = caught
    verdict = agree(error, dist.group.WORLD, timeout_s=30, what="test", timeout_hint=HINT)
    return verdict.failed, verdict.failures


def _nobody_fails():
    return agree(None, dist.group.WORLD, timeout_s=30, what="test", timeout_hint=HINT).failed


def _one_rank_is_late():
    if dist.get_rank() == 1:
        time.sleep(4)
    try:
        agree(None, dist.group.WORLD, timeout_s=1, what="evaluation at step 3", timeout_hint=HINT)
    except EvaluationError as error:
        return str(error)
    return "no timeout"


def test_failure_on_one_rank_is_known_everywhere():
    results = run_distributed(_one_rank_fails, 2, 1, timeout=60)
    for failed, failures in results:
        assert failed
        assert len(failures) == 1 and failures[0][0] == 1
        assert "ValueError: prompt function broke" in failures[0][1]
    assert run_distributed(_nobody_fails, 2, timeout=60) == [False, False]


def test_missing_rank_times_out_instead_of_hanging():
    on_time, late = run_distributed(_one_rank_is_late, 2, timeout=60)
    assert "not every rank reported within 1s" in on_time
    assert on_time.endswith("a rank is stuck or dead. " + HINT)
    assert late == "no timeout"


def test_a_verdict_is_out_of_memory_only_when_every_failure_is_a_failed_allocation():
    from lighteval_nanotron.parallel.agreement import Verdict, describe_exception

    def line(error: BaseException) -> str:
        try:
            raise error
        except BaseException as caught:  # noqa: BLE001 - described as agree() would
            return describe_exception(caught)

    cuda = line(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    cpu = line(RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"))
    other = line(ValueError("prompt function broke"))
    assert Verdict(((0, cuda), (1, cpu))).out_of_memory and Verdict(((1, line(MemoryError())),)).out_of_memory
    assert not Verdict(((0, cuda), (1, other))).out_of_memory and not Verdict().out_of_memory
    assert Verdict(((0, cpu), (1, cpu), (3, other))).describe() == f"world ranks 0, 1: {cpu}; world rank 3: {other}"
