"""`evaluate()` on a real Nanotron Llama: the engine adapter, the mesh, one reporting rank."""

import json

import pytest
from helpers_pipeline import write_datasets
from mesh_cases_pipeline import evaluate_on_mesh

from tests.helpers.distributed import run_distributed
from tests.helpers.results_layout import results_file
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_evaluate_a_nanotron_model_on_one_and_two_data_parallel_ranks(tiny_checkpoint, tmp_path):  # noqa: F811
    data = str(write_datasets(tmp_path / "data"))
    single = run_distributed(evaluate_on_mesh, 1, str(tiny_checkpoint), data, str(tmp_path / "a"), 1, 1, 1)
    double = run_distributed(evaluate_on_mesh, 2, str(tiny_checkpoint), data, str(tmp_path / "b"), 1, 1, 2)

    (reference,) = single
    reporting = [results for results in double if results is not None]
    assert len(reporting) == 1  # one rank reports, the other gets None
    assert set(reference) == {"custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0", "custom|toy_pmi|0", "all"}
    for task, scores in reference.items():
        assert reporting[0][task] == pytest.approx(scores, rel=1e-4, abs=1e-6), task
    written = json.loads(results_file(tmp_path / "b", "tiny", 7).read_text())
    assert written["results"]["custom|toy_mc|0"] == pytest.approx(reference["custom|toy_mc|0"], rel=1e-4)

    # what each task cost: split from the engine's own per-doc counts, the same work at DP1 and DP2
    costs = {run: json.loads(results_file(tmp_path / run, "tiny", 7).read_text()) for run in "ab"}
    weights = {run: costs[run]["config_general"]["weights_fingerprint"] for run in "ab"}
    assert weights["a"] == weights["b"] and len(weights["a"]) == 32  # `evaluate()` names the weights too
    one, two = (costs[run]["task_costs"] for run in "ab")
    assert list(one) == list(two) == [task for task in reference if task != "all"]
    for task, cost in two.items():
        assert cost["docs"] == costs["b"]["config_tasks"][task]["effective_num_docs"] == one[task]["docs"]
        assert cost["useful_tokens"] == one[task]["useful_tokens"] > 0
        assert cost["processed_tokens"] > 0 and cost["seconds"] > 0
    assert sum(cost["seconds"] for cost in two.values()) <= costs["b"]["config_general"]["wall_time_s"]
