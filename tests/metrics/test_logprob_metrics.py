"""LOGPROBS metrics: accuracy with each normalization, recall@k, MRR, greedy gold match."""

import pytest
from helpers_metrics import logprob_response, mc_doc

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics import LogProbCharNorm, LogProbPMINorm, LogProbTokenNorm, Metrics


def acc(doc, response, normalization=None):
    metric = Metrics.loglikelihood_acc
    if normalization is not None:
        metric = metric(sample_params={"logprob_normalization": normalization})
    (value,) = metric.compute_sample(doc, response).values()
    return value


def test_acc_picks_highest_logprob():
    response = logprob_response([-1.0, -2.0, -3.0])
    assert acc(mc_doc(["a", "b", "c"], 0), response) == 1
    assert acc(mc_doc(["a", "b", "c"], 1), response) == 0
    assert Metrics.loglikelihood_acc.compute_sample(mc_doc(["a", "b", "c"], 0), response) == {"acc": 1}


def test_acc_with_several_golds():
    assert acc(mc_doc(["a", "b", "c"], [1, 2]), logprob_response([-3.0, -1.0, -2.0])) == 1
    assert acc(mc_doc(["a", "b", "c"], [0, 2]), logprob_response([-3.0, -1.0, -2.0])) == 0


def test_acc_tie_goes_to_lowest_index():
    response = logprob_response([-1.0, -1.0])
    assert acc(mc_doc(["a", "b"], 0), response) == 1
    assert acc(mc_doc(["a", "b"], 1), response) == 0
    assert acc(mc_doc(["a", "b"], [0, 1]), response) == 1


def test_char_normalization_with_and_without_first_space():
    # " a": 1 char without its leading space, 2 with it; "bb": 2 chars.
    doc, response = mc_doc([" a", "bb"], 1), logprob_response([-1.5, -2.5])
    assert acc(doc, response) == 0  # raw: -1.5 > -2.5
    assert acc(doc, response, LogProbCharNorm()) == 0  # -0.75 > -1.25
    assert acc(doc, response, LogProbCharNorm(ignore_first_space=True)) == 1  # -1.5 < -1.25


def test_token_normalization_uses_continuation_tokens():
    doc = mc_doc(["x", "y"], 1)
    response = logprob_response([-3.0, -4.0], tokens=[[7], [1, 2, 3, 4]])  # -3 vs -1
    assert acc(doc, response) == 0
    assert acc(doc, response, LogProbTokenNorm()) == 1


def test_pmi_normalization_subtracts_unconditioned():
    doc = mc_doc(["x", "y"], 1)
    response = logprob_response([-5.0, -6.0], unconditioned=[-1.0, -4.0])  # -4 vs -2
    assert acc(doc, response) == 0
    assert acc(doc, response, LogProbPMINorm()) == 1


def test_pmi_without_unconditioned_logprobs_names_the_fix():
    with pytest.raises(MetricError, match="unconditioned_query"):
        acc(mc_doc(["x", "y"], 1), logprob_response([-5.0, -6.0]), LogProbPMINorm())


def test_empty_choice_does_not_divide_by_zero():
    assert acc(mc_doc(["", "abcd"], 0), logprob_response([-1.0, -8.0]), LogProbCharNorm()) == 1


def test_missing_logprobs_is_an_error():
    with pytest.raises(MetricError, match="2 choices"):
        acc(mc_doc(["a", "b"], 0), logprob_response([-1.0]))


def test_requires_unconditioned_logprobs_only_for_pmi():
    assert not Metrics.loglikelihood_acc.requires_unconditioned_logprobs
    assert not Metrics.loglikelihood_acc(
        sample_params={"logprob_normalization": "char"}
    ).requires_unconditioned_logprobs
    assert Metrics.loglikelihood_acc(sample_params={"logprob_normalization": "pmi"}).requires_unconditioned_logprobs


@pytest.mark.parametrize(
    ("metric", "gold", "expected"),
    [
        (Metrics.recall_at_1, 1, 0),
        (Metrics.recall_at_2, 1, 1),
        (Metrics.recall_at_2, 2, 0),
        (Metrics.recall_at_k, 0, 1),
    ],
)
def test_recall_at_k(metric, gold, expected):
    response = logprob_response([-1.0, -2.0, -3.0])
    assert list(metric.compute_sample(mc_doc(["a", "b", "c"], gold), response).values()) == [expected]


def test_recall_at_2_tie_keeps_index_order():
    response = logprob_response([-1.0, -1.0, -1.0])
    assert Metrics.recall_at_2.compute_sample(mc_doc(["a", "b", "c"], 2), response) == {"recall@2": 0}
    assert Metrics.recall_at_2.compute_sample(mc_doc(["a", "b", "c"], 1), response) == {"recall@2": 1}


@pytest.mark.parametrize(
    ("logprobs", "gold", "expected"),
    [
        ([-3.0, -1.0, -2.0], 0, 1 / 3),
        ([-3.0, -1.0, -2.0], 1, 1.0),
        ([-3.0, -1.0, -2.0], [0, 2], 1 / 2),
        ([-1.0, -1.0], 1, 1 / 2),
    ],
)
def test_mrr(logprobs, gold, expected):
    doc = mc_doc(["a", "b", "c"][: len(logprobs)], gold)
    assert Metrics.mrr.compute_sample(doc, logprob_response(logprobs))["mrr"] == pytest.approx(expected)


def test_mrr_length_normalization():
    metric = Metrics.mrr(sample_params={"length_normalization": "true"})
    doc = mc_doc(["a", "bbbb"], 1)
    assert metric.compute_sample(doc, logprob_response([-2.0, -4.0])) == {"mrr_with_length_normalization": 1.0}
    assert Metrics.mrr.compute_sample(doc, logprob_response([-2.0, -4.0])) == {"mrr": 0.5}


def test_acc_golds_likelihood_reads_greedy_match_of_gold():
    response = logprob_response([-1.0, -2.0], greedy=[False, True])
    assert Metrics.acc_golds_likelihood.compute_sample(mc_doc(["a", "b"], 1), response) == {"acc": 1}
    assert Metrics.acc_golds_likelihood.compute_sample(mc_doc(["a", "b"], 0), response) == {"acc": 0}


def test_acc_golds_likelihood_without_greedy_flags_is_an_error():
    with pytest.raises(MetricError, match="argmax_logits_eq_gold"):
        Metrics.acc_golds_likelihood.compute_sample(mc_doc(["a"], 0), logprob_response([-1.0], greedy=[]))
