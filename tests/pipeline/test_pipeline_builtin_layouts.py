"""Built-in tasks end to end through the pipeline: TP2 x PP2 gives the metrics of TP1/PP1."""

import math

import pytest
from mesh_cases_pipeline import evaluate_builtin_tasks

from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)


def test_builtin_tasks_at_tp2_pp2_match_tp1_pp1(tiny_checkpoint):  # noqa: F811
    (reference,) = run_distributed(evaluate_builtin_tasks, 1, str(tiny_checkpoint), 1, 1, 1, timeout=300)
    sharded = [r for r in run_distributed(evaluate_builtin_tasks, 4, str(tiny_checkpoint), 2, 2, 1, timeout=300) if r]

    assert len(sharded) == 1  # exactly one reporting rank
    assert set(reference) == {"lighteval|arc:easy|0", "lighteval|piqa|0", "lighteval|triviaqa|0", "all"}
    assert "acc" in reference["lighteval|arc:easy|0"] and "acc" in reference["lighteval|piqa|0"]
    for task, scores in reference.items():
        assert all(math.isfinite(value) for value in scores.values()), task
        assert sharded[0][task] == pytest.approx(scores, abs=1e-6), task
