"""The scalars a metrics backend receives: `eval/<task>/<metric>`, the evaluation's wall time,
each task's model seconds as `eval_time/<task>`, and (from the training hook) the evaluation's
cost in training steps as `eval/cost_train_steps`."""

from __future__ import annotations

import math
import numbers

from lighteval_nanotron.pipeline.result import EvaluationResult

STDERR_SUFFIX = "_stderr"
COST_TRAIN_STEPS_KEY = "eval_cost_train_steps"
"""`extra_config` key the hook fills: evaluation seconds / mean seconds per training step."""


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
    for task, cost in result.task_costs.items():
        scalars[f"{prefix}_time/{task}"] = float(cost["seconds"])
    cost_in_steps = result.extra_config.get(COST_TRAIN_STEPS_KEY)
    if cost_in_steps is not None:
        scalars[f"{prefix}/cost_train_steps"] = float(cost_in_steps)
    return scalars
