"""An evaluation that does not fit the memory it is given, at any micro-batch size, is recorded as
failed in one line naming the memory it needed, and the training goes on untouched."""

import pytest

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import train_logging_worker, train_worker, write_config


def test_an_evaluation_that_fits_no_batch_fails_and_training_is_untouched(tmp_path):
    section = {"memory_budget_gb": 1e-6}  # about a kilobyte: not one row of any task fits
    with_hook = write_config(tmp_path, dp=2, train_steps=4, section=section, name="hook.yaml")
    without = write_config(tmp_path, dp=2, train_steps=4, evaluate=False, name="plain.yaml")
    hooked = run_distributed(train_logging_worker, 2, str(with_hook), timeout=300)
    plain = run_distributed(train_worker, 2, str(without), timeout=300)
    for rank in range(2):
        assert hooked[rank]["losses"] == plain[rank]["losses"]  # bitwise
        assert hooked[rank]["params"] == plain[rank]["params"]
        assert hooked[rank]["evaluated"] == []
        assert [step for step, _ in hooked[rank]["failures"]] == [2, 4]
        for _, description in hooked[rank]["failures"]:
            expected = "world ranks 0, 1: EvaluationOutOfMemory: out of memory: loglikelihood of one row of "
            assert description.startswith(expected)
            assert description.count("out of memory") == 1  # the same message of both ranks, once
            assert "MiB, over memory_budget_gb (1.05 KiB)" in description  # a row of the tiny Llama: about 1 MiB
    (line,) = [m for m in hooked[0]["errors"] if "evaluation at step 2 FAILED" in m]  # logged once, one line
    assert "training continues" in line and "\n" not in line
