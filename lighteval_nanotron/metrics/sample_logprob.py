"""Sample-level scores of LOGPROBS responses: accuracy, recall@k, MRR, greedy gold match.

Ties between choices are broken toward the lower choice index everywhere (as `numpy.argmax`),
so accuracy, recall@k and MRR agree with each other on tied log-probabilities.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics.normalizations import (
    LogProbNormalization,
    LogProbPMINorm,
    normalize_log_probs,
    parse_logprob_normalization,
)
from lighteval_nanotron.metrics.params import Parametrizable
from lighteval_nanotron.requests import Doc, ModelResponse


def gold_indices(doc: Doc) -> list[int]:
    return list(doc.gold_index) if isinstance(doc.gold_index, list) else [doc.gold_index]


def choice_logprobs(doc: Doc, model_response: ModelResponse) -> list[float]:
    """The summed log-probability of each of the doc's choices; errors if some are missing."""
    n_choices = len(doc.choices)
    if len(model_response.logprobs) < n_choices:
        raise MetricError(
            f"Doc {doc.id!r} of task {doc.task_name!r} has {n_choices} choices but the response has "
            f"{len(model_response.logprobs)} log-probs; the engine must score every choice."
        )
    return list(model_response.logprobs[:n_choices])


def ranking(scores: list[float]) -> list[int]:
    """Choice indices from best to worst; equal scores keep index order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def normalized_choice_scores(
    normalization: LogProbNormalization | None, doc: Doc, model_response: ModelResponse
) -> list[float]:
    """Each choice's log-probability under `normalization` (PMI reads the unconditioned log-probs)."""
    n_choices = len(doc.choices)
    unconditioned = model_response.unconditioned_logprobs
    return normalize_log_probs(
        normalization,
        choice_logprobs(doc, model_response),
        doc.choices,
        model_response.output_tokens[:n_choices],
        None if unconditioned is None else list(unconditioned[:n_choices]),
    )


@dataclass(frozen=True)
class ChoiceScoresMetric(Parametrizable):
    """A metric of the choices' (normalized) log-probabilities: the `logprob_normalization`
    parameter (settable per task), what it needs from the engine, and the scores."""

    logprob_normalization: LogProbNormalization | None = None

    param_parsers: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"logprob_normalization": parse_logprob_normalization}

    def __post_init__(self) -> None:
        object.__setattr__(self, "logprob_normalization", parse_logprob_normalization(self.logprob_normalization))

    @property
    def requires_unconditioned_logprobs(self) -> bool:
        return isinstance(self.logprob_normalization, LogProbPMINorm)

    def scores(self, doc: Doc, model_response: ModelResponse) -> list[float]:
        return normalized_choice_scores(self.logprob_normalization, doc, model_response)


@dataclass(frozen=True)
class LoglikelihoodAcc(ChoiceScoresMetric):
    """1 if the choice with the highest (normalized) log-probability is a gold, else 0."""

    def __call__(self, doc: Doc, model_response: ModelResponse) -> int:
        return int(ranking(self.scores(doc, model_response))[0] in gold_indices(doc))

    def chance(self, doc: Doc) -> float:
        """A random ranking picks a gold with probability (number of golds) / (number of choices)."""
        return len(set(gold_indices(doc))) / len(doc.choices)


@dataclass(frozen=True)
class Recall(Parametrizable):
    """1 if a gold is among the `k` choices with the highest log-probability, else 0."""

    k: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise MetricError(f"Recall depth k must be a positive integer, got {self.k!r}.")

    def __call__(self, doc: Doc, model_response: ModelResponse) -> int:
        top_k = ranking(choice_logprobs(doc, model_response))[: self.k]
        golds = gold_indices(doc)
        return int(any(ix in golds for ix in top_k))


@dataclass(frozen=True)
class MRR(Parametrizable):
    """Reciprocal of the rank (1-based) of the best-ranked gold choice.

    `length_normalization` divides each log-probability by the choice's length in characters.
    """

    length_normalization: bool = False

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        scores = choice_logprobs(doc, model_response)
        if self.length_normalization:
            scores = [lp / max(len(choice), 1) for lp, choice in zip(scores, doc.choices)]
        order = ranking(scores)
        best_rank = min(order.index(gold) for gold in gold_indices(doc))
        return 1.0 / (best_rank + 1)


@dataclass(frozen=True)
class AccGoldLikelihood(Parametrizable):
    """1 if greedy decoding reproduces one of the gold choices token by token, else 0."""

    def __call__(self, doc: Doc, model_response: ModelResponse) -> int:
        greedy = model_response.argmax_logits_eq_gold
        golds = [ix for ix in gold_indices(doc) if ix < len(greedy)]
        if not golds:
            raise MetricError(
                f"Doc {doc.id!r} of task {doc.task_name!r}: the response has no argmax_logits_eq_gold "
                "entry for its gold choice; the engine must fill it for every choice."
            )
        return int(any(greedy[ix] for ix in golds))
