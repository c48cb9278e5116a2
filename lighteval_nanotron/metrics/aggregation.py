"""From per-sample metric values to a task's results (value and standard error), and the `all` row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics.metric import Metric
from lighteval_nanotron.metrics.stderr import DEFAULT_BOOTSTRAP_ITERS, DEFAULT_BOOTSTRAP_SEED, standard_error
from lighteval_nanotron.requests.held_out import is_held_out_key

STDERR_SUFFIX = "_stderr"
ALL_TASKS_KEY = "all"


def aggregate_task_metrics(
    metrics: Sequence[Metric],
    sample_values: Sequence[Mapping[str, Any]],
    *,
    bootstrap_iters: int = DEFAULT_BOOTSTRAP_ITERS,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, float]:
    """Corpus value and standard error of every metric of one task.

    `sample_values[j]` holds the `compute_sample` outputs of all `metrics` for doc j, merged.
    Returns `{name: value, name + "_stderr": stderr}` for each metric name, in metric order.
    Mean metrics get the analytic standard error, others a seeded bootstrap (`bootstrap_iters`
    resamples; 0 or 1 gives NaN for those). No samples give NaN values.
    """
    results: dict[str, float] = {}
    for metric in metrics:
        for name, aggregation in metric.get_corpus_aggregations().items():
            values = _values_of(name, sample_values)
            results[name] = float(aggregation(values)) if values else float("nan")
            results[name + STDERR_SUFFIX] = standard_error(aggregation, values, bootstrap_iters, seed)
    return results


def _values_of(name: str, sample_values: Sequence[Mapping[str, Any]]) -> list[Any]:
    try:
        return [sample[name] for sample in sample_values]
    except KeyError as exc:
        raise MetricError(
            f"A sample has no value for metric {name!r}; pass each doc's merged compute_sample() "
            "outputs for every metric of the task."
        ) from exc


def average_over_tasks(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The `all` entry: each metric averaged over the tasks that report it.

    An existing `all` entry and held-out domains (`heldout|...`: they have their own averages) are
    ignored. The standard error of the average of k independent task values is sqrt(sum of
    squared standard errors) / k (lighteval averages the standard errors, which overstates the
    uncertainty of the average).
    """
    values: dict[str, list[float]] = {}
    for task, task_results in results.items():
        if task == ALL_TASKS_KEY or is_held_out_key(task):
            continue
        for name, value in task_results.items():
            values.setdefault(name, []).append(float(value))
    averaged: dict[str, float] = {}
    for name, task_values in values.items():
        k = len(task_values)
        if name.endswith(STDERR_SUFFIX):
            averaged[name] = math.sqrt(sum(v * v for v in task_values)) / k
        else:
            averaged[name] = sum(task_values) / k
    return averaged
