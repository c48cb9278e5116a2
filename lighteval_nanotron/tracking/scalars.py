"""The scalars a metrics backend receives: `eval/<task>/<metric>` (lighteval's group averages and
`all` included), the centered suite score as `eval/suite_score/<metric>`, the evaluation's wall
time, each task's model seconds as `eval_time/<task>`, (from the training hook) the evaluation's
cost in training steps as `eval/cost_train_steps`, and the signal across the run as
`eval_signal/<task>/<metric>/<quantity>` when the result carries it (`analysis.signal_scalars`)."""

from __future__ import annotations

import math
import numbers

from lighteval_nanotron.pipeline.result import SIGNAL_KEY, SUITE_SCORE_KEY, EvaluationResult

STDERR_SUFFIX = "_stderr"
SIGNAL_SCALARS = ("trend", "noise", "snr", "monotonicity", "chance_distance", "mde", "verdict_code")
"""The per-series quantities of `EvaluationResult.signal` sent as scalars (docs/signal.md)."""
COST_TRAIN_STEPS_KEY = "eval_cost_train_steps"
"""`extra_config` key the hook fills: evaluation seconds / mean seconds per training step."""


def result_scalars(result: EvaluationResult, prefix: str = "eval") -> dict[str, float]:
    """Flat `{tag: value}` for TensorBoard / W&B. Standard errors stay in the results file."""
    scalars: dict[str, float] = {}
    entries = {**result.results, SUITE_SCORE_KEY: result.suite_score} if result.suite_score else result.results
    for task, scores in entries.items():
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
    for task, metrics in result.signal.get("series", {}).items():
        for metric, quantities in metrics.items():
            for name in SIGNAL_SCALARS:
                value = quantities.get(name)
                if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value)):
                    scalars[f"{prefix}_{SIGNAL_KEY}/{task}/{metric}/{name}"] = float(value)
    return scalars
