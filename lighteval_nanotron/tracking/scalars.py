"""The scalars a metrics backend receives: `eval/<task>/<metric>` plus the evaluation's wall time."""

from __future__ import annotations

import math
import numbers

from lighteval_nanotron.pipeline.result import EvaluationResult

STDERR_SUFFIX = "_stderr"


def result_scalars(result: EvaluationResult, prefix: str = "eval") -> dict[str, float]:
    """Flat `{tag: value}` for TensorBoard / W&B. Standard errors stay in the results file."""
    scalars: dict[str, float] = {}
    for task, scores in result.results.items():
        for metric, value in scores.items():
            if metric.endswith(STDERR_SUFFIX) or not isinstance(value, numbers.Real):
                continue
            if math.isnan(float(value)):
                continue
            scalars[f"{prefix}/{task}/{metric}"] = float(value)
    scalars[f"{prefix}/wall_time_s"] = float(result.wall_time_s)
    return scalars
