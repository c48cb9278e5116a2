"""GENERATIVE metrics: exact match variants, quasi exact match, F1, GSM8K numeric answers."""

import pytest
from helpers_metrics import gen_doc, gen_response

from lighteval_nanotron.metrics import Metrics


def score(metric, golds, *texts):
    (value,) = metric.compute_sample(gen_doc(golds), gen_response(*texts)).values()
    return value


def test_exact_match_strips_by_default():
    assert score(Metrics.exact_match, ["Paris"], " Paris\n") == 1
    assert score(Metrics.exact_match, ["Paris"], "paris") == 0
    assert Metrics.exact_match.compute_sample(gen_doc(["Paris"]), gen_response("Paris")) == {"em": 1}


def test_exact_match_empty_prediction_never_matches():
    assert score(Metrics.exact_match, [""], "") == 0
    assert score(Metrics.exact_match, ["Paris"], "") == 0
    assert score(Metrics.exact_match, ["Paris"]) == 0  # no generation at all


def test_exact_match_several_golds_and_predictions():
    assert score(Metrics.exact_match, ["Paris", "paris"], "paris") == 1
    assert score(Metrics.exact_match, ["Rome"], "Paris", "Rome") == 1


def test_exact_match_without_stripping():
    metric = Metrics.exact_match(sample_params={"strip_strings": False})
    assert metric.metric_name == "em_with_strip_strings"
    assert score(metric, ["Paris"], " Paris") == 0


def test_quasi_exact_match_uses_helm_normalizer():
    assert Metrics.quasi_exact_match.metric_name == "em_with_normalize_gold&normalize_pred"
    assert score(Metrics.quasi_exact_match, ["The Eiffel-Tower!"], "eiffel tower") == 1
    assert score(Metrics.quasi_exact_match, ["1"], "01") == 1  # both "1.0"
    assert score(Metrics.exact_match, ["The Eiffel-Tower!"], "eiffel tower") == 0


def test_prefix_and_suffix_exact_match():
    assert score(Metrics.prefix_exact_match, ["Paris"], "Paris is the capital") == 1
    assert score(Metrics.prefix_exact_match, ["Paris"], "It is Paris") == 0
    assert score(Metrics.suffix_exact_match, ["Paris"], "It is Paris") == 1
    assert score(Metrics.prefix_quasi_exact_match, ["the Paris"], "Paris, France") == 1
    assert Metrics.prefix_quasi_exact_match.metric_name == "em_with_normalize_gold&normalize_pred&type_exact_match"


def test_f1_bag_of_words():
    # gold {the, cat, sat}, pred {the, cat, ran, away}: p = 2/4, r = 2/3, F1 = 4/7
    assert score(Metrics.f1_score, ["the cat sat"], "the cat ran away") == pytest.approx(4 / 7)
    assert score(Metrics.f1_score, ["a a b"], "a") == pytest.approx(2 / 3)  # sets: p = 1, r = 1/2
    assert score(Metrics.f1_score, ["the cat"], "") == 0.0
    assert score(Metrics.f1_score, ["dog", "the cat"], "cat") == pytest.approx(2 / 3)  # max over golds


def test_gsm8k_exact_match():
    gold = "She sold 48 + 24 = 72 clips.\n#### 72"
    assert score(Metrics.gsm8k_exact_match, [gold], "48 + 24 = 72\n#### 72") == 1
    assert score(Metrics.gsm8k_exact_match, [gold], "#### 1,072") == 0
    assert score(Metrics.gsm8k_exact_match, [gold], "The answer is 72") == 0  # no #### marker


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("48 + 24 = 1234\n#### 1,234", 1),
        ("So the answer is 1234.", 1),
        ("\\boxed{1234.0}", 1),
        ("First 5, then 7, finally $1,234", 1),
        ("#### 1233", 0),
        ("no number here", 0),
        ("", 0),
    ],
)
def test_expr_gold_metric_compares_final_numbers(pred, expected):
    assert score(Metrics.expr_gold_metric, ["Total: 1000 + 234\n#### 1,234"], pred) == expected


def test_expr_gold_metric_fractions_and_percents():
    assert score(Metrics.expr_gold_metric, ["#### 1/2"], "The answer is 0.5") == 1
    assert score(Metrics.expr_gold_metric, ["#### 0.25"], "The answer is 25%") == 1
    assert score(Metrics.expr_gold_metric, ["#### -3"], "#### -3.0001") == 0
    assert score(Metrics.expr_gold_metric, ["#### -3"], "#### -3.000001") == 1  # 5 decimal places
    assert Metrics.expr_gold_metric.metric_name == "extractive_match"
