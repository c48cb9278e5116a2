"""`Metrics`: the built-in metrics under lighteval's names.

Each attribute is a ready `Metric`; call it with `sample_params` for a parametrized copy:
`Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbCharNorm()})`.
`Metrics["exact_match"]` looks a metric up by attribute name, `list(Metrics)` lists the names.
"""

from __future__ import annotations

from collections.abc import Iterator

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics import corpus
from lighteval_nanotron.metrics.metric import CorpusLevelMetric, Metric, SampleLevelMetric
from lighteval_nanotron.metrics.normalizations import LogProbCharNorm, gsm8k_normalizer, helm_normalizer
from lighteval_nanotron.metrics.preparators import (
    LoglikelihoodPreparator,
    PerplexityPreparator,
    TargetPerplexityPreparator,
)
from lighteval_nanotron.metrics.sample_generative import ExactMatches, F1Score, NumericAnswerMatch
from lighteval_nanotron.metrics.sample_gold import GoldBitsPerByte, GoldMargin, GoldProbability
from lighteval_nanotron.metrics.sample_logprob import MRR, AccGoldLikelihood, LoglikelihoodAcc, Recall
from lighteval_nanotron.metrics.sample_sampling import MajAtK, PassAtK
from lighteval_nanotron.requests import SamplingMethod

LOGPROBS, GENERATIVE, PERPLEXITY = SamplingMethod.LOGPROBS, SamplingMethod.GENERATIVE, SamplingMethod.PERPLEXITY
_HELM = {"normalize_gold": helm_normalizer, "normalize_pred": helm_normalizer}


class _MetricsTable(type):
    def __getitem__(cls, name: str) -> Metric:
        metric = cls.__dict__.get(name)
        if not isinstance(metric, Metric):
            raise MetricError(f"Unknown metric {name!r}. Known metrics: {', '.join(cls)}.")
        return metric

    def __iter__(cls) -> Iterator[str]:
        return iter([name for name, value in cls.__dict__.items() if isinstance(value, Metric)])

    def __contains__(cls, name: object) -> bool:
        return isinstance(cls.__dict__.get(name), Metric)


def _sampled(name: str, fn: MajAtK | PassAtK) -> Metric:
    return SampleLevelMetric(
        metric_name=name, higher_is_better=True, category=GENERATIVE, sample_level_fn=fn, corpus_level_fn=corpus.mean
    )


def _em(**params) -> Metric:
    return exact_match(sample_params=params)


exact_match = SampleLevelMetric(
    metric_name="em",
    higher_is_better=True,
    category=GENERATIVE,
    sample_level_fn=ExactMatches(strip_strings=True),
    corpus_level_fn=corpus.mean,
)


class Metrics(metaclass=_MetricsTable):
    """Built-in metrics; the comment after each gives its result key(s)."""

    # LOGPROBS: multiple-choice scoring
    loglikelihood_acc = SampleLevelMetric(  # "acc"
        metric_name="acc",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=LoglikelihoodAcc(),
        corpus_level_fn=corpus.mean,
    )
    loglikelihood_acc_norm = SampleLevelMetric(  # "acc_norm": per character (lighteval's name)
        metric_name="acc_norm",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=LoglikelihoodAcc(logprob_normalization=LogProbCharNorm()),
        corpus_level_fn=corpus.mean,
    )
    acc_golds_likelihood = SampleLevelMetric(  # "acc"
        metric_name="acc",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=AccGoldLikelihood(),
        corpus_level_fn=corpus.mean,
    )
    mrr = SampleLevelMetric(  # "mrr"
        metric_name="mrr", higher_is_better=True, category=LOGPROBS, sample_level_fn=MRR(), corpus_level_fn=corpus.mean
    )
    recall_at_k = SampleLevelMetric(  # "recall" (k=1; set k with sample_params)
        metric_name="recall",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=Recall(k=1),
        corpus_level_fn=corpus.mean,
    )
    recall_at_1 = SampleLevelMetric(  # "recall@1"
        metric_name="recall@1",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=Recall(k=1),
        corpus_level_fn=corpus.mean,
    )
    recall_at_2 = SampleLevelMetric(  # "recall@2"
        metric_name="recall@2",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=Recall(k=2),
        corpus_level_fn=corpus.mean,
    )
    mcc = CorpusLevelMetric(  # "mcc"
        metric_name="mcc",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=LoglikelihoodPreparator(),
        corpus_level_fn=corpus.matthews_corrcoef,
    )
    target_perplexity = CorpusLevelMetric(  # "ppl": per token of the gold choice(s)
        metric_name="ppl",
        higher_is_better=False,
        category=LOGPROBS,
        sample_level_fn=TargetPerplexityPreparator(units_type="tokens"),
        corpus_level_fn=corpus.weighted_perplexity,
    )

    # LOGPROBS: continuous scores of the gold answer (docs/metrics.md, "Gold-answer metrics").
    # On a generative task they add one log-likelihood request per doc, scoring its golds.
    gold_bpb = SampleLevelMetric(  # "gold_bpb": bits per UTF-8 byte of the (best) gold continuation
        metric_name="gold_bpb",
        higher_is_better=False,
        category=LOGPROBS,
        sample_level_fn=GoldBitsPerByte(),
        corpus_level_fn=corpus.mean,
    )
    normalized_mc_prob = SampleLevelMetric(  # "normalized_mc_prob": p(gold) / sum of p(choice)
        metric_name="normalized_mc_prob",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=GoldProbability(),
        corpus_level_fn=corpus.mean,
    )
    normalized_mc_prob_norm = SampleLevelMetric(  # "normalized_mc_prob_norm": the same per character
        metric_name="normalized_mc_prob_norm",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=GoldProbability(logprob_normalization=LogProbCharNorm()),
        corpus_level_fn=corpus.mean,
    )
    gold_margin = SampleLevelMetric(  # "gold_margin": best gold log-prob - best wrong one (nats)
        metric_name="gold_margin",
        higher_is_better=True,
        category=LOGPROBS,
        sample_level_fn=GoldMargin(),
        corpus_level_fn=corpus.mean,
    )

    # GENERATIVE: compare generations with the golds
    exact_match = exact_match  # "em"
    quasi_exact_match = _em(**_HELM)  # "em_with_normalize_gold&normalize_pred"
    prefix_exact_match = _em(type_exact_match="prefix")  # "em_with_type_exact_match"
    suffix_exact_match = _em(type_exact_match="suffix")  # "em_with_type_exact_match"
    prefix_quasi_exact_match = _em(**_HELM, type_exact_match="prefix")
    # ^ "em_with_normalize_gold&normalize_pred&type_exact_match"
    gsm8k_exact_match = _em(normalize_gold=gsm8k_normalizer, normalize_pred=gsm8k_normalizer)
    # ^ "em_with_normalize_gold&normalize_pred" (lighteval's gsm8k leaderboard metric)
    expr_gold_metric = SampleLevelMetric(  # "extractive_match": final numeric answer
        metric_name="extractive_match",
        higher_is_better=True,
        category=GENERATIVE,
        sample_level_fn=NumericAnswerMatch(precision=5),
        corpus_level_fn=corpus.mean,
    )
    f1_score = SampleLevelMetric(  # "f1": bag-of-words F1
        metric_name="f1",
        higher_is_better=True,
        category=GENERATIVE,
        sample_level_fn=F1Score(),
        corpus_level_fn=corpus.mean,
    )

    # GENERATIVE with several samples per doc (needs a generation temperature > 0)
    maj_at_5 = _sampled("maj@5", MajAtK(k=5))  # "maj@5"
    maj_at_8 = _sampled("maj@8", MajAtK(k=8))  # "maj@8"
    maj_at_8_gsm8k = _sampled(  # "maj@8"
        "maj@8", MajAtK(k=8, strip_strings=True, normalize_gold=gsm8k_normalizer, normalize_pred=gsm8k_normalizer)
    )
    pass_at_1 = _sampled("pass@1:32_samples", PassAtK(k=1, n=32, strip_strings=True))  # "pass@1:32_samples"
    pass_at_10 = _sampled("pass@10:32_samples", PassAtK(k=10, n=32, strip_strings=True))  # "pass@10:32_samples"

    # PERPLEXITY: rolling log-likelihood of the doc text
    prediction_perplexity = CorpusLevelMetric(  # "ppl": per token
        metric_name="ppl",
        higher_is_better=False,
        category=PERPLEXITY,
        sample_level_fn=PerplexityPreparator(units_type="tokens"),
        corpus_level_fn=corpus.weighted_perplexity,
    )
    word_perplexity = CorpusLevelMetric(  # "word_perplexity"
        metric_name="word_perplexity",
        higher_is_better=False,
        category=PERPLEXITY,
        sample_level_fn=PerplexityPreparator(units_type="words"),
        corpus_level_fn=corpus.weighted_perplexity,
    )
    byte_perplexity = CorpusLevelMetric(  # "byte_perplexity"
        metric_name="byte_perplexity",
        higher_is_better=False,
        category=PERPLEXITY,
        sample_level_fn=PerplexityPreparator(units_type="bytes"),
        corpus_level_fn=corpus.weighted_perplexity,
    )
    bits_per_byte = CorpusLevelMetric(  # "bits_per_byte"
        metric_name="bits_per_byte",
        higher_is_better=False,
        category=PERPLEXITY,
        sample_level_fn=PerplexityPreparator(units_type="bytes"),
        corpus_level_fn=corpus.bits_per_byte,
    )
