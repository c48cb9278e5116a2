"""Gold-answer metrics: continuous scores of the gold choice from the log-probs accuracy already uses.

Accuracy only moves when the gold overtakes every other choice; these move as soon as the model
puts more probability on the gold (DataDecide, OLMo's in-loop evaluator). All read
`ModelResponse.logprobs` (each choice's summed log-probability given the context), so on a
multiple-choice task they cost no forward pass of their own; on a generative task with reference
answers they add one log-likelihood request per doc (the task's choices are its golds).

- `GoldBitsPerByte`: -log p(gold | context) / (ln 2 * UTF-8 bytes of the gold); the best
  (lowest) gold when there are several.
- `GoldProbability`: p(gold) / sum of p(choice) over the doc's choices, after an optional
  log-prob normalization (lighteval's `normalized_mc_prob`); the best gold when there are several.
- `GoldMargin`: best gold's (normalized) log-prob minus the best wrong choice's, in nats.

Each also answers `chance(doc)` where an uninformed model has a known score (used for centered
values and for the distance from chance, docs/signal.md), and `check_docs(task_name, docs)`,
called before any model call, refusing docs the metric cannot score.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lighteval_nanotron.errors import ConfigError, MetricError
from lighteval_nanotron.metrics.params import Parametrizable
from lighteval_nanotron.metrics.sample_logprob import ChoiceScoresMetric, choice_logprobs, gold_indices
from lighteval_nanotron.requests import Doc, ModelResponse

LN_2 = math.log(2.0)


def _refuse_docs(task_name: str, docs: Sequence[Doc], metric: str, needs: str, bad: Callable[[Doc], bool]) -> None:
    for row, doc in enumerate(docs):
        if bad(doc):
            raise ConfigError(
                f"Task {task_name!r}, row {row} (doc id {doc.id!r}): metric {metric} needs {needs}; this doc has "
                f"{len(doc.choices)} choice(s) with gold index {doc.gold_index!r}. Drop the metric from the task or "
                "fix its prompt function."
            )


def _without_wrong_choice(doc: Doc) -> bool:
    return len(set(gold_indices(doc))) >= len(doc.choices)


@dataclass(frozen=True)
class GoldBitsPerByte(Parametrizable):
    """Bits per UTF-8 byte of the gold continuation; with several golds, the lowest."""

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        logprobs = choice_logprobs(doc, model_response)
        return min(-logprobs[g] / (LN_2 * len(str(doc.choices[g]).encode("utf-8"))) for g in gold_indices(doc))

    def check_docs(self, task_name: str, docs: Sequence[Doc]) -> None:
        _refuse_docs(
            task_name,
            docs,
            "gold_bpb",
            "gold choices that are non-empty text (bits per byte of an empty answer are undefined)",
            lambda doc: not doc.choices or any(not str(doc.choices[g]).encode("utf-8") for g in gold_indices(doc)),
        )


@dataclass(frozen=True)
class GoldProbability(ChoiceScoresMetric):
    """p(gold) / sum over the choices of p(choice), p from the (normalized) log-probs.

    Computed as a softmax over the choices' scores (no underflow for long continuations, unlike
    exponentiating each log-prob); with several golds the largest gold probability (lighteval's
    default aggregation)."""

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        scores = self.scores(doc, model_response)
        top = max(scores)
        weights = [math.exp(score - top) for score in scores]
        return max(weights[g] for g in gold_indices(doc)) / sum(weights)

    def chance(self, doc: Doc) -> float:
        """Uniform probability over the choices: 1 / number of choices."""
        return 1.0 / len(doc.choices)

    def check_docs(self, task_name: str, docs: Sequence[Doc]) -> None:
        _refuse_docs(task_name, docs, "normalized_mc_prob", "at least one wrong choice", _without_wrong_choice)


@dataclass(frozen=True)
class GoldMargin(ChoiceScoresMetric):
    """Best gold's (normalized) log-prob minus the best wrong choice's, in nats (> 0: gold ahead)."""

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        scores = self.scores(doc, model_response)
        golds = set(gold_indices(doc))
        wrong = [score for index, score in enumerate(scores) if index not in golds]
        if not wrong:
            raise MetricError(
                f"Doc {doc.id!r} of task {doc.task_name!r} has no wrong choice: gold_margin is undefined."
            )
        return max(scores[g] for g in golds) - max(wrong)

    def check_docs(self, task_name: str, docs: Sequence[Doc]) -> None:
        _refuse_docs(task_name, docs, "gold_margin", "at least one wrong choice", _without_wrong_choice)
