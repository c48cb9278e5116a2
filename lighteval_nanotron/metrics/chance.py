"""Chance levels and centered values: what an uninformed model scores, per doc.

A sample-level function that knows its chance level on a doc exposes `chance(doc)` (accuracy:
golds / choices; gold probability: 1 / choices). From it:

- `centered_metrics(metrics, docs)`: for each such metric `m`, a metric `m_centered` whose per-doc
  value is (value - chance) / (1 - chance), chance taken per doc from its own number of choices
  (DCLM's CORE centering). 0 is chance and 1 perfect whatever the number of choices, so docs and
  tasks with 2, 4 or 5 choices average fairly; its corpus value is the mean, with the mean's
  standard error. A task with a doc whose chance is 1 (a single choice, or every choice gold: the
  metric cannot tell models apart there) gets no centered metric.
- `chance_levels(metrics, docs)`: each metric's chance on a task, the mean over its docs (0 for
  the centered ones), recorded in the results for the signal analysis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.metrics import corpus
from lighteval_nanotron.metrics.metric import Metric, MetricGrouping, SampleLevelMetric
from lighteval_nanotron.requests import Doc, ModelResponse

CENTERED_SUFFIX = "_centered"


def has_chance(metric: Any) -> bool:
    """A single-valued, mean-aggregated metric whose sample-level function gives `chance(doc)`."""
    return (
        isinstance(metric, Metric)
        and not isinstance(metric, MetricGrouping)
        and corpus.is_mean(metric.corpus_level_fn)
        and callable(getattr(metric.sample_level_fn, "chance", None))
    )


@dataclass(frozen=True)
class Centered:
    """(value - chance) / (1 - chance) of `base` on each doc."""

    base: Any
    base_name: str

    @property
    def requires_unconditioned_logprobs(self) -> bool:
        return bool(getattr(self.base, "requires_unconditioned_logprobs", False))

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        level = self.base.chance(doc)
        return (float(self.base(doc, model_response)) - level) / (1.0 - level)


def centered_metrics(metrics: Sequence[Any], docs: Sequence[Doc]) -> list[Metric]:
    """`m_centered` for every metric `m` that has a chance level below 1 on every doc, in order."""
    return [
        SampleLevelMetric(
            metric_name=metric.metric_name + CENTERED_SUFFIX,
            higher_is_better=True,
            category=metric.category,
            sample_level_fn=Centered(metric.sample_level_fn, metric.metric_name),
            corpus_level_fn=corpus.mean,
        )
        for metric in metrics
        if has_chance(metric)
        and metric.higher_is_better is True
        and docs
        and all(metric.sample_level_fn.chance(doc) < 1.0 for doc in docs)
    ]


def chance_levels(metrics: Sequence[Any], docs: Sequence[Doc]) -> dict[str, float]:
    """`{metric name: mean chance over the docs}` for the metrics with a chance level."""
    levels: dict[str, float] = {}
    for metric in metrics:
        if isinstance(metric.sample_level_fn, Centered):
            levels[metric.metric_name] = 0.0
        elif has_chance(metric) and docs:
            levels[metric.metric_name] = sum(metric.sample_level_fn.chance(doc) for doc in docs) / len(docs)
    return levels


def higher_is_better(metrics: Sequence[Any]) -> dict[str, bool]:
    """`{result key: direction}` of every metric (groupings give one entry per key)."""
    directions: dict[str, bool] = {}
    for metric in metrics:
        value = getattr(metric, "higher_is_better", None)
        names = getattr(metric, "metric_names", None) or [getattr(metric, "metric_name", None)]
        for name in names:
            if isinstance(name, str):
                direction = value.get(name) if isinstance(value, dict) else value
                if isinstance(direction, bool):
                    directions[name] = direction
    return directions
