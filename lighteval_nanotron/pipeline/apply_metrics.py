"""From model responses to per-sample metric values and details, then to task results.

Runs on the reporting rank only, on plain Python objects: no process group in sight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lighteval_nanotron.errors import EvaluationError, MetricError
from lighteval_nanotron.metrics import aggregate_task_metrics
from lighteval_nanotron.pipeline.aggregates import with_aggregates
from lighteval_nanotron.pipeline.request_groups import METHOD_ORDER, RequestGroup
from lighteval_nanotron.pipeline.result import SampleDetail
from lighteval_nanotron.requests import Doc, ModelResponse, SamplingMethod


def _gold_indices(doc: Doc) -> list[int]:
    return list(doc.gold_index) if isinstance(doc.gold_index, list) else [doc.gold_index]


def make_detail(
    task_name: str, method: SamplingMethod, doc: Doc, response: ModelResponse, prompt: str, metrics: dict
) -> SampleDetail:
    """What the model saw and answered for one doc, and how it scored."""
    golds = _gold_indices(doc)
    choices = [str(choice) for choice in doc.choices]
    return SampleDetail(
        task_name=task_name,
        doc_id=str(doc.id),
        sampling_method=method.value,
        query=doc.query,
        full_prompt=response.input if response.input else prompt,
        choices=choices,
        gold_index=golds,
        gold=[choices[i] for i in golds if 0 <= i < len(choices)],
        predictions=[str(text) for text in response.text],
        logprobs=[float(v) for v in response.logprobs],
        argmax_logits_eq_gold=[bool(v) for v in response.argmax_logits_eq_gold],
        unconditioned_logprobs=(
            None if response.unconditioned_logprobs is None else [float(v) for v in response.unconditioned_logprobs]
        ),
        input_tokens=[int(t) for t in response.input_tokens],
        output_tokens=[[int(t) for t in tokens] for tokens in response.output_tokens],
        truncated_tokens_count=int(response.truncated_tokens_count or 0),
        padded_tokens_count=int(response.padded_tokens_count or 0),
        metrics=metrics,
    )


def _score_one(metrics: Sequence[Any], task_name: str, doc: Doc, response: ModelResponse) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for metric in metrics:
        try:
            values.update(metric.compute_sample(doc, response))
        except MetricError:
            raise
        except Exception as error:
            raise MetricError(
                f"Metric {metric.metric_name!r} of task {task_name!r} failed on doc {doc.id!r} "
                f"({type(error).__name__}: {error}). Check that the task's prompt function fills what "
                "this metric reads (choices, gold_index, specific), or drop the metric from the task."
            ) from error
    return values


def _non_finite(response: ModelResponse) -> bool:
    """Whether the model's numbers for this doc are NaN/inf (log-probs, or logits while generating)."""
    values = [*response.logprobs, *(response.unconditioned_logprobs or [])]
    return response.non_finite_logits or not all(math.isfinite(float(v)) for v in values)


def _unknown_tokens_reason(count: int, total: int, example: int) -> str:
    return (
        f"{count} of {total} docs generated token ids the tokenizer does not have (e.g. {example}: a row of the "
        "model's vocabulary past the tokenizer's), which decoding would drop without a word: use the tokenizer "
        "the model was trained with"
    )


def _non_finite_reason(count: int, total: int) -> str:
    return (
        f"{count} of {total} docs got non-finite (NaN/inf) log-probabilities or logits from the model, so its "
        "scores would be meaningless: check the checkpoint's weights (and the dtype: float16 overflows easily)"
    )


@dataclass
class ScoredTasks:
    """Per task: each doc's merged metric values and the details rows; and the tasks that failed."""

    sample_values: dict[str, list[dict[str, Any]]]
    details: dict[str, list[SampleDetail]]
    failed: dict[str, str] = field(default_factory=dict)
    """`{task: reason}`: a metric raised or the model's numbers were not finite; such a task has
    no values or details, and the other tasks are unaffected."""


def score_groups(
    metrics_by_task: Mapping[str, Sequence[Any]],
    num_docs_by_task: Mapping[str, int],
    groups: Sequence[RequestGroup],
    responses: Sequence[Sequence[ModelResponse]],
    render_prompt: Callable[[Doc], str],
) -> ScoredTasks:
    """Score every doc (all sampling methods; details ordered by doc, then sampling method).
    `responses[i]` answers `groups[i]`. A task whose metric raises, or whose docs got non-finite
    numbers, is recorded in `failed` and costs only itself."""
    sample_values = {task: [{} for _ in range(n)] for task, n in num_docs_by_task.items()}
    keyed_details: dict[str, list[tuple[int, int, SampleDetail]]] = {task: [] for task in num_docs_by_task}
    failed: dict[str, str] = {}
    non_finite: dict[str, set[int]] = {task: set() for task in num_docs_by_task}
    unknown: dict[str, dict[int, int]] = {task: {} for task in num_docs_by_task}
    for group, group_responses in zip(groups, responses, strict=True):
        if len(group_responses) != len(group.docs):
            raise EvaluationError(
                f"The model returned {len(group_responses)} {group.method.value} responses for "
                f"{len(group.docs)} requests; every request needs exactly one response, in order."
            )
        method_rank = METHOD_ORDER.index(group.method)
        rows = zip(group.docs, group.task_names, group.doc_indices, group_responses, strict=True)
        for doc, task, index, response in rows:
            if _non_finite(response):
                non_finite[task].add(index)
            if response.unknown_tokens:
                unknown[task][index] = response.unknown_tokens[0]
            if task in failed or non_finite[task] or unknown[task]:
                continue
            metrics = [m for m in metrics_by_task[task] if m.category == group.method]
            try:
                values = _score_one(metrics, task, doc, response)
            except MetricError as error:
                failed[task] = str(error)
                continue
            sample_values[task][index].update(values)
            detail = make_detail(task, group.method, doc, response, render_prompt(doc), values)
            keyed_details[task].append((index, method_rank, detail))
    for task, examples in unknown.items():
        if examples:
            failed[task] = _unknown_tokens_reason(len(examples), num_docs_by_task[task], next(iter(examples.values())))
    for task, indices in non_finite.items():
        if indices:
            failed[task] = _non_finite_reason(len(indices), num_docs_by_task[task])
    details = {
        task: [detail for _, _, detail in sorted(rows, key=lambda row: row[:2])]
        for task, rows in keyed_details.items()
        if task not in failed
    }
    values = {task: per_doc for task, per_doc in sample_values.items() if task not in failed}
    return ScoredTasks(values, details, failed)


def aggregate_results(
    metrics_by_task: Mapping[str, Sequence[Any]],
    sample_values: Mapping[str, list[dict[str, Any]]],
    bootstrap_iters: int | None = None,
    failed: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    """`{task: {metric: value, metric_stderr: error}}` in task order, then lighteval's group
    averages and the `all` average (`aggregates.with_aggregates`), none of them over a failed task.
    A task whose corpus aggregation raises is left out and added to `failed` with the reason."""
    options = {} if bootstrap_iters is None else {"bootstrap_iters": bootstrap_iters}
    results = {}
    for task, values in sample_values.items():
        try:
            results[task] = aggregate_task_metrics(metrics_by_task[task], values, **options)
        except Exception as error:  # noqa: BLE001 - one task's broken metric costs only that task
            if failed is None:
                raise
            failed[task] = f"aggregating its metrics failed ({type(error).__name__}: {error})"
    return with_aggregates(results, failed or ())
