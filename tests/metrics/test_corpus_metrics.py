"""Corpus-level metrics: MCC and the perplexity family, from compute_sample to the corpus value."""

import math

import pytest
from helpers_metrics import logprob_response, mc_doc, ppl_response, text_doc

from lighteval_nanotron.metrics import Metrics, aggregate_task_metrics
from lighteval_nanotron.metrics.corpus import matthews_corrcoef
from lighteval_nanotron.metrics.preparators import ClassificationInput


def corpus_value(metric, docs_and_responses):
    samples = [metric.compute_sample(doc, response) for doc, response in docs_and_responses]
    return aggregate_task_metrics([metric], samples)[metric.metric_name]


def test_mcc_binary_by_hand():
    # class 1 positive: TP=1, TN=2, FP=0, FN=1 -> (1*2 - 0*1) / sqrt(1*2*2*3)
    pairs = [(0, 0), (0, 0), (1, 1), (1, 0)]
    samples = [
        (mc_doc(["no", "yes"], gold), logprob_response([-1.0, -2.0] if pred == 0 else [-2.0, -1.0]))
        for gold, pred in pairs
    ]
    assert corpus_value(Metrics.mcc, samples) == pytest.approx(2 / math.sqrt(12))


def test_mcc_multiclass_by_hand():
    # t = [1, 1, 2], p = [1, 2, 1], correct = 3, n = 4 -> (12 - 5) / sqrt(10 * 10)
    items = [ClassificationInput(g, p) for g, p in [(0, 0), (1, 1), (2, 2), (2, 1)]]
    assert matthews_corrcoef(items) == pytest.approx(0.7)


def test_mcc_degenerate_cases():
    assert matthews_corrcoef([ClassificationInput(0, 0), ClassificationInput(1, 0)]) == 0.0
    assert matthews_corrcoef([ClassificationInput(0, 0), ClassificationInput(1, 1)]) == 1.0
    assert matthews_corrcoef([ClassificationInput(0, 1), ClassificationInput(1, 0)]) == -1.0


def test_mcc_sample_value_uses_first_gold_and_argmax():
    sample = Metrics.mcc.compute_sample(mc_doc(["a", "b", "c"], [2, 0]), logprob_response([-3.0, -1.0, -1.0]))
    assert sample == {"mcc": ClassificationInput(gold=2, pred=1)}


def test_word_perplexity_weights_by_words():
    samples = [(text_doc("hello world"), ppl_response(-4.0, 3)), (text_doc(" a b\n c\td "), ppl_response(-2.0, 5))]
    assert corpus_value(Metrics.word_perplexity, samples) == pytest.approx(math.e)  # exp(6 / 6)


def test_byte_perplexity_and_bits_per_byte_count_utf8_bytes():
    # "héllo" is 6 UTF-8 bytes (5 characters), "日本" is 6 bytes (2 characters).
    samples = [(text_doc("héllo"), ppl_response(-6.0, 2)), (text_doc("日本"), ppl_response(-6.0, 1))]
    assert corpus_value(Metrics.byte_perplexity, samples) == pytest.approx(math.e)  # exp(12 / 12)
    assert corpus_value(Metrics.bits_per_byte, samples) == pytest.approx(1 / math.log(2))


def test_perplexity_prefers_original_query():
    doc = text_doc("Context: ignored prompt words", original_query="two words")
    assert Metrics.word_perplexity.compute_sample(doc, ppl_response(-2.0, 4))["word_perplexity"].weight == 2


def test_prediction_perplexity_is_per_token():
    samples = [(text_doc("x"), ppl_response(-3.0, 3)), (text_doc("y"), ppl_response(-1.0, 1))]
    assert corpus_value(Metrics.prediction_perplexity, samples) == pytest.approx(math.e)  # exp(4 / 4)
    assert Metrics.prediction_perplexity.higher_is_better is False


def test_target_perplexity_uses_gold_choice_tokens():
    samples = [
        (mc_doc([" x y", " z"], 0), logprob_response([-2.0, -9.0], tokens=[[1, 2], [3]])),
        (mc_doc([" a"], 0), logprob_response([-4.0], tokens=[[1, 2, 3, 4, 5, 6]])),
    ]
    assert corpus_value(Metrics.target_perplexity, samples) == pytest.approx(math.exp(6 / 8))


def test_perplexity_overflow_gives_inf():
    assert corpus_value(Metrics.word_perplexity, [(text_doc("a"), ppl_response(-1e6, 1))]) == math.inf
