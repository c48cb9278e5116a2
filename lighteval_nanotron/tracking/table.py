"""A compact text table of an evaluation's scores, for the training log."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.scalars import STDERR_SUFFIX


def _fmt(value: object) -> str:
    return f"{float(value):.4f}" if isinstance(value, numbers.Real) else str(value)


def format_results_table(result: EvaluationResult | Mapping[str, Mapping[str, float]]) -> str:
    """One row per (task, metric): value and standard error, columns aligned.

    Given an `EvaluationResult`, a first line names the step and the wall time.
    """
    results = result.results if isinstance(result, EvaluationResult) else result
    rows = [("Task", "Metric", "Value", "Stderr")]
    for task, scores in results.items():
        for metric, value in scores.items():
            if metric.endswith(STDERR_SUFFIX):
                continue
            stderr = scores.get(metric + STDERR_SUFFIX)
            rows.append((task, metric, _fmt(value), "" if stderr is None else "± " + _fmt(stderr)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [row[2].rjust(widths[2]), row[3].rjust(widths[3])]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    if isinstance(result, EvaluationResult):
        step = "no step" if result.step is None else f"step {result.step}"
        lines.insert(0, f"Evaluation of {result.model_name} at {step} ({result.wall_time_s:.1f}s)")
    return "\n".join(lines)
