"""Every rank learns that one rank failed, with its message, within a deadline."""

import time

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
