"""Sample-level inputs of corpus-level metrics: what each doc contributes to MCC or perplexity.

They return small named tuples, so per-sample details stay plain data (picklable, Parquet-able).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics.params import Parametrizable
from lighteval_nanotron.metrics.sample_logprob import choice_logprobs, gold_indices, ranking
from lighteval_nanotron.requests import Doc, ModelResponse

UNIT_TYPES = ("words", "bytes", "tokens")


class ClassificationInput(NamedTuple):
    """The gold class (first gold index) and the predicted class (best log-prob choice)."""

    gold: int
    pred: int


class PerplexityInput(NamedTuple):
    """A summed log-likelihood and the number of units (words, bytes or tokens) it covers."""

    logprob: float
    weight: int


def count_units(text: str, units_type: str) -> int:
    """Words (whitespace-separated) or UTF-8 bytes of `text`."""
    if units_type == "words":
        return len(text.split())
    return len(text.encode("utf-8"))


def _check_units(units_type: str, allowed: tuple[str, ...]) -> None:
    if units_type not in allowed:
        raise MetricError(f"units_type must be one of {', '.join(allowed)}, got {units_type!r}.")


@dataclass(frozen=True)
class LoglikelihoodPreparator(Parametrizable):
    """Classification input for MCC: the first gold index and the argmax choice."""

    def __call__(self, doc: Doc, model_response: ModelResponse) -> ClassificationInput:
        pred = ranking(choice_logprobs(doc, model_response))[0]
        return ClassificationInput(gold=gold_indices(doc)[0], pred=pred)


@dataclass(frozen=True)
class PerplexityPreparator(Parametrizable):
    """PERPLEXITY response: the rolling log-likelihood of the doc text and its size.

    The text is `doc.original_query` when set, else `doc.query` (as lighteval). With
    `units_type="tokens"` the weight is the number of scored tokens (`output_tokens[0]`).
    """

    units_type: str = "words"

    def __post_init__(self) -> None:
        _check_units(self.units_type, UNIT_TYPES)

    def __call__(self, doc: Doc, model_response: ModelResponse) -> PerplexityInput:
        if not model_response.logprobs:
            raise MetricError(
                f"Doc {doc.id!r} of task {doc.task_name!r}: a PERPLEXITY response needs logprobs == [total]."
            )
        logprob = float(sum(model_response.logprobs))
        if self.units_type == "tokens":
            weight = sum(len(tokens) for tokens in model_response.output_tokens)
        else:
            text = doc.original_query if doc.original_query is not None else doc.query
            weight = count_units(text, self.units_type)
        return PerplexityInput(logprob=logprob, weight=weight)


@dataclass(frozen=True)
class TargetPerplexityPreparator(Parametrizable):
    """LOGPROBS response: the summed log-probability of the gold choice(s) and their size."""

    units_type: str = "words"

    def __post_init__(self) -> None:
        _check_units(self.units_type, UNIT_TYPES)

    def __call__(self, doc: Doc, model_response: ModelResponse) -> PerplexityInput:
        logprobs = choice_logprobs(doc, model_response)
        golds = gold_indices(doc)
        logprob = float(sum(logprobs[ix] for ix in golds))
        if self.units_type == "tokens":
            weight = sum(len(model_response.output_tokens[ix]) for ix in golds)
        else:
            weight = count_units(" ".join(doc.choices[ix] for ix in golds), self.units_type)
        return PerplexityInput(logprob=logprob, weight=weight)
