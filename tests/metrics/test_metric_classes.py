"""Metric objects: parametrized copies and their names, string params, groupings, custom metrics."""

from dataclasses import dataclass

import numpy as np
import pytest
from helpers_metrics import gen_doc, gen_response, logprob_response, mc_doc

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics import (
    CorpusLevelMetric,
    LogProbCharNorm,
    LogProbTokenNorm,
    Metric,
    Metrics,
    SampleLevelMetric,
    SampleLevelMetricGrouping,
    aggregate_task_metrics,
    helm_normalizer,
)
from lighteval_nanotron.requests import SamplingMethod


def test_parametrized_copy_gets_lighteval_name_and_leaves_original_alone():
    original_fn = Metrics.loglikelihood_acc.sample_level_fn
    metric = Metrics.loglikelihood_acc(
        sample_params={"logprob_normalization": LogProbCharNorm(ignore_first_space=True)}
    )
    assert metric.metric_name == "acc_with_logprob_normalization"
    assert metric.sample_level_fn.logprob_normalization == LogProbCharNorm(ignore_first_space=True)
    assert metric is not Metrics.loglikelihood_acc
    assert Metrics.loglikelihood_acc.metric_name == "acc"
    assert Metrics.loglikelihood_acc.sample_level_fn is original_fn
    assert original_fn.logprob_normalization is None
    assert metric.category is SamplingMethod.LOGPROBS and metric.higher_is_better is True


def test_several_params_join_names_in_given_order():
    metric = Metrics.exact_match(
        sample_params={
            "normalize_gold": helm_normalizer,
            "normalize_pred": helm_normalizer,
            "type_exact_match": "prefix",
        }
    )
    assert metric.metric_name == "em_with_normalize_gold&normalize_pred&type_exact_match"
    assert Metrics.exact_match(sample_params=None).metric_name == "em"
    assert Metrics.exact_match(sample_params={}).metric_name == "em"


def test_string_params_from_task_specs_are_converted():
    assert Metrics.loglikelihood_acc(
        sample_params={"logprob_normalization": "char"}
    ).sample_level_fn.logprob_normalization == (LogProbCharNorm(ignore_first_space=True))
    assert (
        Metrics.loglikelihood_acc(
            sample_params={"logprob_normalization": "token"}
        ).sample_level_fn.logprob_normalization
        == LogProbTokenNorm()
    )
    em = Metrics.exact_match(
        sample_params={"strip_strings": "False", "normalize_pred": "helm", "type_exact_match": "suffix"}
    )
    assert em.sample_level_fn.strip_strings is False
    assert em.sample_level_fn.normalize_pred is helm_normalizer
    assert em.sample_level_fn.type_exact_match == "suffix"
    assert Metrics.recall_at_k(sample_params={"k": "2"}).sample_level_fn.k == 2


def test_string_param_changes_the_score():
    metric = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": "token"})
    response = logprob_response([-3.0, -4.0], tokens=[[1], [1, 2, 3, 4]])
    assert metric.compute_sample(mc_doc(["x", "y"], 1), response) == {"acc_with_logprob_normalization": 1}


@pytest.mark.parametrize(
    ("metric", "params", "message"),
    [
        (Metrics.loglikelihood_acc, {"normalisation": "char"}, "Known parameters: logprob_normalization"),
        (Metrics.loglikelihood_acc, {"logprob_normalization": "chars"}, "Unknown logprob_normalization"),
        (Metrics.exact_match, {"type_exact_match": "middle"}, "type_exact_match must be one of"),
        (Metrics.exact_match, {"strip_strings": "maybe"}, "must be true or false"),
        (Metrics.recall_at_k, {"k": "two"}, "must be int"),
        (Metrics.recall_at_k, {"k": 0}, "positive integer"),
        (Metrics.word_perplexity, {"units_type": "lines"}, "units_type must be one of"),
    ],
)
def test_bad_params_raise_metric_error(metric, params, message):
    with pytest.raises(MetricError, match=message):
        metric(sample_params=params)


def test_metric_with_plain_function_takes_no_params():
    metric = SampleLevelMetric(
        metric_name="len",
        higher_is_better=True,
        category="GENERATIVE",
        sample_level_fn=lambda doc, response: len(response.text[0]),
        corpus_level_fn=np.mean,
    )
    with pytest.raises(MetricError, match="takes no parameters"):
        metric(sample_params={"x": 1})


def test_invalid_definitions_are_rejected():
    with pytest.raises(MetricError, match="category"):
        SampleLevelMetric(
            metric_name="m",
            higher_is_better=True,
            category="SAMPLING",
            sample_level_fn=lambda d, r: 0,
            corpus_level_fn=np.mean,
        )
    with pytest.raises(MetricError, match="exactly the metric names"):
        SampleLevelMetricGrouping(
            metric_name=["a", "b"],
            higher_is_better={"a": True},
            category=SamplingMethod.GENERATIVE,
            sample_level_fn=lambda d, r: {},
            corpus_level_fn=np.mean,
        )


@dataclass(frozen=True)
class LengthStats:
    """A user-defined grouped sample-level function with one parameter."""

    unit: str = "chars"

    def __call__(self, doc, model_response):
        text = model_response.text[0]
        size = len(text) if self.unit == "chars" else len(text.split())
        return {"pred_len": size, "gold_len": len(doc.get_golds()[0])}


def test_grouping_compute_aggregate_and_parametrize():
    group = SampleLevelMetricGrouping(
        metric_name=["pred_len", "gold_len"],
        higher_is_better={"pred_len": False, "gold_len": False},
        category=SamplingMethod.GENERATIVE,
        sample_level_fn=LengthStats(),
        corpus_level_fn={"pred_len": np.mean, "gold_len": max},
    )
    samples = [
        group.compute_sample(gen_doc(["abcd"]), gen_response("two words")),
        group.compute_sample(gen_doc(["ab"]), gen_response("one")),
    ]
    assert samples == [{"pred_len": 9, "gold_len": 4}, {"pred_len": 3, "gold_len": 2}]
    result = aggregate_task_metrics([group], samples)
    assert result["pred_len"] == 6.0 and result["gold_len"] == 4.0
    assert result["pred_len_stderr"] == pytest.approx(3.0)  # std([9, 3], ddof=1) / sqrt(2)

    words = group(sample_params={"unit": "words"})
    assert words.metric_name == ["pred_len_with_unit", "gold_len_with_unit"]
    assert set(words.get_corpus_aggregations()) == {"pred_len_with_unit", "gold_len_with_unit"}
    assert words.higher_is_better == {"pred_len_with_unit": False, "gold_len_with_unit": False}
    assert words.compute_sample(gen_doc(["abcd"]), gen_response("two words")) == {
        "pred_len_with_unit": 2,
        "gold_len_with_unit": 4,
    }
    assert group.metric_name == ["pred_len", "gold_len"]


def test_custom_metrics_without_touching_the_library():
    """The extension point shown in docs/metrics.md."""

    def answer_length(doc, model_response) -> float:
        return float(len(model_response.text[0].split()))

    length = SampleLevelMetric(
        metric_name="answer_length",
        higher_is_better=False,
        category=SamplingMethod.GENERATIVE,
        sample_level_fn=answer_length,
        corpus_level_fn=np.mean,
    )
    median_length = CorpusLevelMetric(
        metric_name="median_length",
        higher_is_better=False,
        category=SamplingMethod.GENERATIVE,
        sample_level_fn=answer_length,
        corpus_level_fn=lambda values: float(np.median(values)),
    )
    docs = [gen_doc(["x"])] * 3
    responses = [gen_response("a"), gen_response("a b c"), gen_response("a b c d e")]
    samples = [{**length.compute_sample(d, r), **median_length.compute_sample(d, r)} for d, r in zip(docs, responses)]
    result = aggregate_task_metrics([length, median_length], samples, bootstrap_iters=50, seed=0)
    assert result["answer_length"] == 3.0 and result["median_length"] == 3.0
    assert result["answer_length_stderr"] == pytest.approx(2 / np.sqrt(3))
    assert result["median_length_stderr"] > 0


def test_subclassed_metric_and_lighteval_style_compute_object():
    class Contains:
        def compute(self, doc, model_response, **kwargs):
            return int(doc.get_golds()[0] in model_response.text[0])

    class ContainsMetric(SampleLevelMetric):
        pass

    metric = ContainsMetric(
        metric_name="contains",
        higher_is_better=True,
        category=SamplingMethod.GENERATIVE,
        sample_level_fn=Contains(),
        corpus_level_fn=np.mean,
    )
    assert isinstance(metric, Metric)
    assert metric.compute_sample(gen_doc(["cat"]), gen_response("a cat!")) == {"contains": 1}


def test_metrics_table_lookup():
    assert Metrics["exact_match"] is Metrics.exact_match
    assert "mcc" in Metrics and "nope" not in Metrics
    assert "loglikelihood_acc" in list(Metrics)
    with pytest.raises(MetricError, match="Known metrics"):
        Metrics["nope"]
