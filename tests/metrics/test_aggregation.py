"""A task's corpus values with standard errors, and the `all` average over tasks."""

import math

import pytest
from helpers_metrics import logprob_response, mc_doc

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics import Metrics, aggregate_task_metrics, average_over_tasks


def test_aggregate_task_metrics_values_and_keys():
    metrics = [Metrics.loglikelihood_acc, Metrics.mrr]
    cases = [([-1.0, -2.0], 0), ([-1.0, -2.0], 1), ([-3.0, -1.0], 1), ([-1.0, -1.5], 1)]
    samples = []
    for logprobs, gold in cases:
        doc, response = mc_doc(["a", "b"], gold), logprob_response(logprobs)
        samples.append({k: v for m in metrics for k, v in m.compute_sample(doc, response).items()})
    result = aggregate_task_metrics(metrics, samples)
    assert list(result) == ["acc", "acc_stderr", "mrr", "mrr_stderr"]
    assert result["acc"] == 0.5  # [1, 0, 1, 0]
    assert result["acc_stderr"] == pytest.approx(math.sqrt(1 / 3) / 2)
    assert result["mrr"] == pytest.approx(0.75)  # [1, 1/2, 1, 1/2]
    assert all(isinstance(v, float) for v in result.values())


def test_aggregate_single_doc_and_no_doc():
    single = aggregate_task_metrics([Metrics.loglikelihood_acc], [{"acc": 1}])
    assert single["acc"] == 1.0 and math.isnan(single["acc_stderr"])  # no spread to estimate: unknown, not 0
    empty = aggregate_task_metrics([Metrics.loglikelihood_acc], [])
    assert math.isnan(empty["acc"]) and math.isnan(empty["acc_stderr"])


def test_aggregate_missing_sample_value_is_an_error():
    with pytest.raises(MetricError, match="'acc'"):
        aggregate_task_metrics([Metrics.loglikelihood_acc], [{"em": 1}])


def test_average_over_tasks():
    results = {
        "lighteval|a|0": {"acc": 0.5, "acc_stderr": 0.3},
        "lighteval|b|0": {"acc": 1.0, "acc_stderr": 0.4, "em": 1.0, "em_stderr": 0.0},
        "all": {"acc": 123.0},
    }
    averaged = average_over_tasks(results)
    assert averaged["acc"] == pytest.approx(0.75)
    assert averaged["acc_stderr"] == pytest.approx(0.25)  # sqrt(0.09 + 0.16) / 2
    assert averaged["em"] == 1.0 and averaged["em_stderr"] == 0.0
    assert average_over_tasks({}) == {}
