"""`evaluate()` on a real Nanotron Llama: the engine adapter, the mesh, one reporting rank."""

import json
import shutil

import pytest
from helpers_pipeline import write_datasets
from mesh_cases_pipeline import evaluate_into_a_step, evaluate_on_mesh

from tests.helpers.distributed import run_distributed
from tests.helpers.results_layout import results_file
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)


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


def test_evaluate_refuses_other_weights_at_a_written_step_before_its_forwards(tiny_checkpoint, tmp_path):  # noqa: F811
    """`evaluate()` of another checkpoint into a step that holds another task was refused only by
    the writer, after every forward; now on every rank before them (a `ConfigError` naming the
    step), the file untouched. The same weights merge."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    data, out = str(write_datasets(tmp_path / "data")), str(tmp_path / "out")
    other = tmp_path / "other"
    shutil.copytree(tiny_checkpoint, other)
    path = next(p for p in sorted((other / "model").rglob("*.safetensors")) if "mlp" in str(p))
    with safe_open(str(path), framework="pt") as handle:
        metadata, tensor = handle.metadata(), handle.get_tensor("data")
    save_file({"data": tensor * 1.01}, str(path), metadata=metadata)

    assert run_distributed(evaluate_into_a_step, 2, str(tiny_checkpoint), data, out, "custom|toy_mc|0") == [None, None]
    written = results_file(tmp_path / "out", "tiny", 7)
    before = written.read_bytes()
    refused = run_distributed(evaluate_into_a_step, 2, str(other), data, out, "custom|toy_ppl|0")
    for error in refused:  # every rank, before the forwards: the writer's refusal is a TrackingError
        assert error.startswith("ConfigError: Step 7 of tiny") and "measured on other weights" in error, error
    assert written.read_bytes() == before
    assert run_distributed(evaluate_into_a_step, 2, str(tiny_checkpoint), data, out, "custom|toy_ppl|0") == [None, None]
    assert set(json.loads(written.read_text())["results"]) >= {"custom|toy_mc|0", "custom|toy_ppl|0"}
