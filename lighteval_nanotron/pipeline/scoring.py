"""From model responses to per-sample metric values and details, then to task results.

Runs on the reporting rank only, on plain Python objects: no process group in sight.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lighteval_nanotron.errors import EvaluationError, MetricError
from lighteval_nanotron.metrics import aggregate_task_metrics, average_over_tasks
from lighteval_nanotron.pipeline.requests import METHOD_ORDER, RequestGroup
from lighteval_nanotron.pipeline.result import ALL_TASKS_KEY, SampleDetail
from lighteval_nanotron.tasks.requests import Doc, ModelResponse, SamplingMethod


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


def score_groups(
    metrics_by_task: Mapping[str, Sequence[Any]],
    num_docs_by_task: Mapping[str, int],
    groups: Sequence[RequestGroup],
    responses: Sequence[Sequence[ModelResponse]],
    render_prompt: Callable[[Doc], str],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[SampleDetail]]]:
    """Per task: each doc's merged metric values (all sampling methods), and the details rows
    (ordered by doc, then sampling method). `responses[i]` answers `groups[i]`."""
    sample_values = {task: [{} for _ in range(n)] for task, n in num_docs_by_task.items()}
    keyed_details: dict[str, list[tuple[int, int, SampleDetail]]] = {task: [] for task in num_docs_by_task}
    for group, group_responses in zip(groups, responses, strict=True):
        if len(group_responses) != len(group.docs):
            raise EvaluationError(
                f"The model returned {len(group_responses)} {group.method.value} responses for "
                f"{len(group.docs)} requests; every request needs exactly one response, in order."
            )
        method_rank = METHOD_ORDER.index(group.method)
        rows = zip(group.docs, group.task_names, group.doc_indices, group_responses, strict=True)
        for doc, task, index, response in rows:
            metrics = [m for m in metrics_by_task[task] if m.category == group.method]
            values = _score_one(metrics, task, doc, response)
            sample_values[task][index].update(values)
            detail = make_detail(task, group.method, doc, response, render_prompt(doc), values)
            keyed_details[task].append((index, method_rank, detail))
    details = {
        task: [detail for _, _, detail in sorted(rows, key=lambda row: row[:2])] for task, rows in keyed_details.items()
    }
    return sample_values, details


def aggregate_results(
    metrics_by_task: Mapping[str, Sequence[Any]],
    sample_values: Mapping[str, list[dict[str, Any]]],
    bootstrap_iters: int | None = None,
) -> dict[str, dict[str, float]]:
    """`{task: {metric: value, metric_stderr: error}}` in task order, plus the `all` average."""
    options = {} if bootstrap_iters is None else {"bootstrap_iters": bootstrap_iters}
    results = {
        task: aggregate_task_metrics(metrics_by_task[task], values, **options) for task, values in sample_values.items()
    }
    results[ALL_TASKS_KEY] = average_over_tasks(results)
    return results
