"""A task that samples (its own temperature, 5 generations per doc for maj@5 and pass@1 over 5)
through `evaluate`: the same samples and scores on one and on two data-parallel ranks, and each
doc's scores are the metrics applied to its own five samples."""

import pytest
from helpers_pipeline import write_datasets
from mesh_cases_pipeline import evaluate_sampled_on_mesh

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.requests import Doc, ModelResponse
from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

PASS_AT_1 = "pass@1:32_samples_with_n"


def test_sampled_task_gives_the_same_samples_and_scores_on_one_and_two_replicas(tiny_checkpoint, tmp_path):  # noqa: F811
    data = str(write_datasets(tmp_path / "data"))
    (single,) = run_distributed(evaluate_sampled_on_mesh, 1, str(tiny_checkpoint), data, 1, 1, 1, timeout=180)
    double = [r for r in run_distributed(evaluate_sampled_on_mesh, 2, str(tiny_checkpoint), data, 1, 1, 2) if r]
    results, details = single
    assert double[0][1] == details
    assert double[0][0]["custom|toy_sampled|0"] == pytest.approx(results["custom|toy_sampled|0"])
    assert all(len(predictions) == 5 for predictions, _, _ in details)
    assert any(len(set(predictions)) > 1 for predictions, _, _ in details)  # sampled, not five greedy copies
    pass_at_1 = Metrics.pass_at_1(sample_params={"n": 5})
    for predictions, gold, metrics in details:
        doc, response = Doc(query="", choices=gold, gold_index=0), ModelResponse(text=predictions)
        assert metrics["maj@5"] == Metrics.maj_at_5.compute_sample(doc, response)["maj@5"]
        assert metrics[PASS_AT_1] == pytest.approx(pass_at_1.compute_sample(doc, response)[PASS_AT_1])
    scores = results["custom|toy_sampled|0"]
    assert scores["maj@5"] == pytest.approx(sum(m["maj@5"] for _, _, m in details) / len(details))
