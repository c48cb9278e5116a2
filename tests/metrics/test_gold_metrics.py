"""Gold-answer metrics and centered values, against values computed by hand."""

import math

import pytest
from helpers_metrics import gen_doc, logprob_response, mc_doc

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.metrics import LogProbCharNorm, Metrics, aggregate_task_metrics
from lighteval_nanotron.metrics.chance import centered_metrics, chance_levels, higher_is_better

LN2 = math.log(2)


def value(metric, doc, response):
    (result,) = metric.compute_sample(doc, response).values()
    return result


# --- gold bits per byte --------------------------------------------------------------------------


def test_gold_bpb_counts_utf8_bytes_not_characters():
    # " café": 5 characters, 6 bytes (é is 2 bytes); -3 nats over 6 bytes.
    doc = mc_doc([" café", " tea"], 0)
    assert value(Metrics.gold_bpb, doc, logprob_response([-3.0, -0.5])) == pytest.approx(3 / (LN2 * 6))
    # " 🙂": 1 + 4 bytes.
    assert value(Metrics.gold_bpb, mc_doc([" 🙂", "x"], 0), logprob_response([-5.0, -1.0])) == pytest.approx(
        5 / (LN2 * 5)
    )
    # " 日本": 1 + 3 + 3 bytes
    assert value(Metrics.gold_bpb, mc_doc([" 日本", "x"], 0), logprob_response([-7.0, -1.0])) == pytest.approx(1 / LN2)


def test_gold_bpb_takes_the_best_gold_per_byte_not_the_likeliest():
    # " a": -2 nats / 2 bytes = 1.4427 bits/byte; " longer answer": -4 nats / 14 bytes = 0.4122.
    doc = mc_doc([" a", " longer answer", " b"], [0, 1])
    assert value(Metrics.gold_bpb, doc, logprob_response([-2.0, -4.0, -0.1])) == pytest.approx(4 / (LN2 * 14))


def test_gold_bpb_ignores_wrong_choices_and_works_on_all_gold_docs():
    # a generative task's reference answers: every choice is gold
    doc = gen_doc([" 72", " seventy-two"])
    assert value(Metrics.gold_bpb, doc, logprob_response([-6.0, -6.0])) == pytest.approx(6 / (LN2 * 12))


def test_gold_bpb_refuses_an_empty_gold_before_any_model_call():
    with pytest.raises(ConfigError, match="gold_bpb.*non-empty"):
        Metrics.gold_bpb.sample_level_fn.check_docs("t|x|0", [mc_doc(["", " b"], 0)])
    Metrics.gold_bpb.sample_level_fn.check_docs("t|x|0", [mc_doc(["", " b"], 1)])  # empty wrong choice: fine


# --- probability of the gold normalized over the choices -----------------------------------------


def test_normalized_mc_prob_raw():
    response = logprob_response([math.log(0.2), math.log(0.3), math.log(0.1)])
    assert value(Metrics.normalized_mc_prob, mc_doc(["a", "b", "c"], 0), response) == pytest.approx(1 / 3)
    assert value(Metrics.normalized_mc_prob, mc_doc(["a", "b", "c"], 2), response) == pytest.approx(1 / 6)
    # several golds: the largest gold probability (lighteval's default aggregation)
    assert value(Metrics.normalized_mc_prob, mc_doc(["a", "b", "c"], [0, 1]), response) == pytest.approx(0.5)


def test_normalized_mc_prob_ties_and_long_continuations():
    assert value(Metrics.normalized_mc_prob, mc_doc(["a", "b"], 1), logprob_response([-4.0, -4.0])) == 0.5
    # exp(-2000) underflows to 0; the softmax does not: 1 / (1 + e^-1)
    response = logprob_response([-2000.0, -2001.0])
    assert value(Metrics.normalized_mc_prob, mc_doc(["a", "b"], 0), response) == pytest.approx(1 / (1 + math.exp(-1)))


def test_normalized_mc_prob_per_character():
    # "ab": -2 / 2 = -1, "abcd": -2 / 4 = -0.5 -> e^-1 / (e^-1 + e^-0.5)
    expected = math.exp(-1) / (math.exp(-1) + math.exp(-0.5))
    response = logprob_response([-2.0, -2.0])
    assert value(Metrics.normalized_mc_prob_norm, mc_doc(["ab", "abcd"], 0), response) == pytest.approx(expected)
    by_param = Metrics.normalized_mc_prob(sample_params={"logprob_normalization": "LogProbCharNorm()"})
    assert by_param.metric_name == "normalized_mc_prob_with_logprob_normalization"
    assert value(by_param, mc_doc(["ab", "abcd"], 0), response) == pytest.approx(expected)


# --- margin over the best wrong choice -----------------------------------------------------------


def test_gold_margin():
    response = logprob_response([-1.0, -2.0, -3.5])
    assert value(Metrics.gold_margin, mc_doc(["a", "b", "c"], 0), response) == 1.0
    assert value(Metrics.gold_margin, mc_doc(["a", "b", "c"], 1), response) == -1.0
    assert value(Metrics.gold_margin, mc_doc(["a", "b", "c"], [1, 2]), response) == -1.0  # best gold -2 vs -1
    assert value(Metrics.gold_margin, mc_doc(["a", "b"], 1), logprob_response([-3.0, -3.0])) == 0.0  # tie


def test_gold_margin_per_character():
    margin = Metrics.gold_margin(sample_params={"logprob_normalization": LogProbCharNorm()})
    # "ab": -2 / 2 = -1, "abcd": -3 / 4 = -0.75
    assert value(margin, mc_doc(["ab", "abcd"], 0), logprob_response([-2.0, -3.0])) == pytest.approx(-0.25)


def test_metrics_that_need_a_wrong_choice_refuse_all_gold_docs():
    doc = gen_doc([" x", " y"])
    for metric in (Metrics.gold_margin, Metrics.normalized_mc_prob):
        with pytest.raises(ConfigError, match="at least one wrong choice"):
            metric.sample_level_fn.check_docs("t|x|0", [mc_doc(["a", "b"], 0), doc])


# --- chance, centering, directions, standard errors ----------------------------------------------


def test_chance_and_centered_values_per_doc():
    acc = Metrics.loglikelihood_acc
    (centered,) = centered_metrics([acc, Metrics.gold_bpb], [mc_doc(["a", "b"], 0)])  # bpb has no chance level
    assert centered.metric_name == "acc_centered" and centered.higher_is_better is True
    two, four, five_two_golds = mc_doc(["a", "b"], 0), mc_doc(list("abcd"), 1), mc_doc(list("abcde"), [0, 3])
    assert [acc.sample_level_fn.chance(d) for d in (two, four, five_two_golds)] == [0.5, 0.25, 0.4]
    # right on 2 choices: (1 - 1/2) / (1 - 1/2) = 1; wrong on 4: (0 - 1/4) / (3/4) = -1/3
    assert value(centered, two, logprob_response([-1.0, -2.0])) == 1.0
    assert value(centered, four, logprob_response([-1.0, -2.0, -3.0, -4.0])) == pytest.approx(-1 / 3)
    # wrong on 5 with 2 golds: (0 - 0.4) / 0.6
    assert value(centered, five_two_golds, logprob_response([-5.0, -1.0, -2.0, -3.0, -4.0])) == pytest.approx(-2 / 3)
    levels = chance_levels([acc, centered, Metrics.normalized_mc_prob], [two, four])
    assert levels == {"acc": pytest.approx(0.375), "acc_centered": 0.0, "normalized_mc_prob": pytest.approx(0.375)}


def test_no_centered_metric_when_a_doc_cannot_miss():
    # a doc whose choices are all gold is right whatever the model does: nothing to center
    docs = [mc_doc(["a", "b"], 0), gen_doc([" x", " y"])]
    assert centered_metrics([Metrics.loglikelihood_acc], docs) == []
    assert [m.metric_name for m in centered_metrics([Metrics.loglikelihood_acc], docs[:1])] == ["acc_centered"]


def test_directions():
    metrics = [Metrics.loglikelihood_acc, Metrics.gold_bpb, Metrics.gold_margin, Metrics.normalized_mc_prob_norm]
    assert higher_is_better(metrics) == {
        "acc": True,
        "gold_bpb": False,
        "gold_margin": True,
        "normalized_mc_prob_norm": True,
    }


def test_gold_metrics_have_the_standard_error_of_the_mean():
    # per-doc bits per byte 1, 2, 3 (" ab" is 3 bytes): mean 2, std 1, stderr 1 / sqrt(3)
    docs = [mc_doc([" ab", " c"], 0) for _ in range(3)]
    responses = [logprob_response([-b * LN2 * 3, -1.0]) for b in (1.0, 2.0, 3.0)]
    values = [Metrics.gold_bpb.compute_sample(d, r) for d, r in zip(docs, responses)]
    results = aggregate_task_metrics([Metrics.gold_bpb], values)
    assert results["gold_bpb"] == pytest.approx(2.0)
    assert results["gold_bpb_stderr"] == pytest.approx(1 / math.sqrt(3))
