"""A compact text table of an evaluation's scores, for the training log."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from lighteval_nanotron.pipeline.result import SUITE_SCORE_KEY, EvaluationResult
from lighteval_nanotron.tracking.scalars import STDERR_SUFFIX


def _fmt(value: object) -> str:
    return f"{float(value):.4f}" if isinstance(value, numbers.Real) else str(value)


def _aligned(rows: list[tuple[str, ...]], left: int) -> list[str]:
    """Markdown-style lines; the first `left` columns left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(w) if i < left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return lines


COST_NOTE = (
    "Computed: token positions the model ran (padding included; a prefix shared by several docs counted once). "
    "Useful: per doc, its context plus what is scored or generated (above Computed where docs share a prefix)."
)


def format_cost_table(task_costs: Mapping[str, Mapping[str, float]]) -> str:
    """One row per task: model seconds, docs, docs/s, token positions computed, useful tokens; a
    last line says what the two token columns count."""
    rows = [("Task", "Seconds", "Docs", "Docs/s", "Computed tokens", "Useful tokens")]
    for task, cost in task_costs.items():
        rows.append(
            (
                task,
                f"{cost['seconds']:.2f}",
                str(cost["docs"]),
                f"{cost['docs_per_s']:.1f}",
                str(cost["processed_tokens"]),
                str(cost["useful_tokens"]),
            )
        )
    return "\n".join([*_aligned(rows, left=1), COST_NOTE])


def format_results_line(results: Mapping[str, Mapping[str, float]]) -> str:
    """Each task's first metric on one line (`task metric value ± stderr; ...`), the cross-task
    `all` left out: what the training log shows per evaluation unless verbose."""
    parts = []
    for task, scores in results.items():
        metric = next((name for name in scores if not name.endswith(STDERR_SUFFIX)), None)
        if task == "all" or metric is None:
            continue
        stderr = scores.get(metric + STDERR_SUFFIX)
        error = "" if not isinstance(stderr, numbers.Real) else f" ± {float(stderr):.3f}"
        value = f"{float(scores[metric]):.3f}" if isinstance(scores[metric], numbers.Real) else str(scores[metric])
        parts.append(f"{task} {metric} {value}{error}")
    return "; ".join(parts)


def format_results_table(result: EvaluationResult | Mapping[str, Mapping[str, float]]) -> str:
    """One row per (task, metric): value and standard error, columns aligned.

    Given an `EvaluationResult`, a first line names the step and the wall time, the centered
    suite score has rows of its own (`suite_score`), and the per-task cost table
    (`format_cost_table`) follows.
    """
    results = result.results if isinstance(result, EvaluationResult) else result
    if isinstance(result, EvaluationResult) and result.suite_score:
        results = {**results, SUITE_SCORE_KEY: result.suite_score}
    rows = [("Task", "Metric", "Value", "Stderr")]
    for task, scores in results.items():
        for metric, value in scores.items():
            if metric.endswith(STDERR_SUFFIX):
                continue
            stderr = scores.get(metric + STDERR_SUFFIX)
            rows.append((task, metric, _fmt(value), "" if stderr is None else "± " + _fmt(stderr)))
    lines = _aligned(rows, left=2)
    if isinstance(result, EvaluationResult):
        step = "" if result.step is None else f" at step {result.step}"
        lines.insert(0, f"Evaluation of {result.model_name}{step} ({result.wall_time_s:.1f}s)")
        if result.task_costs:
            lines += ["", format_cost_table(result.task_costs)]
    return "\n".join(lines)
