"""The one place that knows how the pipeline talks to a model.

Any `LightevalModel` works: its three request methods run at every evaluation. A model that
also offers the engine's prepare-once split (`prepare_loglikelihood`, `prepare_rolling`,
`prepare_generation` and `run(plan)`, as `NanotronLightevalModel` does) gets its plans built
once, in `prepare_requests`, and only `run(plan)` is called per evaluation.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.pipeline.requests import RequestGroup
from lighteval_nanotron.tasks.requests import ModelResponse, SamplingMethod

MODEL_CALLS = {
    SamplingMethod.LOGPROBS: "loglikelihood",
    SamplingMethod.PERPLEXITY: "loglikelihood_rolling",
    SamplingMethod.GENERATIVE: "greedy_until",
}
PREPARE_CALLS = {
    SamplingMethod.LOGPROBS: "prepare_loglikelihood",
    SamplingMethod.PERPLEXITY: "prepare_rolling",
    SamplingMethod.GENERATIVE: "prepare_generation",
}


@dataclass
class PreparedRequests:
    """The request groups and, for a planning model, one plan per group (else None)."""

    groups: list[RequestGroup]
    plans: list[Any]


def plans_ahead(model: Any) -> bool:
    """Whether the model splits requests into prepare (once) and run (per evaluation)."""
    return callable(getattr(model, "run", None)) and all(
        callable(getattr(model, name, None)) for name in PREPARE_CALLS.values()
    )


def _check_unconditioned(model: Any, groups: list[RequestGroup]) -> None:
    if not any(group.unconditioned for group in groups):
        return
    call = getattr(model, "prepare_loglikelihood" if plans_ahead(model) else "loglikelihood")
    if "unconditioned" not in inspect.signature(call).parameters:
        raise ConfigError(
            f"A task uses a PMI metric, which needs unconditioned log-probabilities, but "
            f"{type(model).__name__}.{call.__name__} has no `unconditioned` argument: use a model "
            "that supports it (e.g. NanotronLightevalModel) or drop the PMI metric."
        )


def _kwargs(group: RequestGroup) -> dict[str, Any]:
    return {"unconditioned": True} if group.unconditioned else {}


def prepare_requests(model: Any, groups: list[RequestGroup]) -> PreparedRequests:
    """Build the model's plans (prompts, tokens, batches) once, when it can."""
    _check_unconditioned(model, groups)
    if not plans_ahead(model):
        return PreparedRequests(groups, [None] * len(groups))
    plans = [getattr(model, PREPARE_CALLS[g.method])(g.docs, **_kwargs(g)) for g in groups]
    return PreparedRequests(groups, plans)


def run_requests(model: Any, prepared: PreparedRequests, progress: Any = None) -> list[list[ModelResponse]]:
    """The model's responses, one list per group. Every rank must call this together.
    `progress` (a tqdm bar, if any) advances by each group's docs as the group is done."""
    responses = []
    for group, plan in zip(prepared.groups, prepared.plans, strict=True):
        if plan is not None:
            responses.append(list(model.run(plan)))
        else:
            responses.append(list(getattr(model, MODEL_CALLS[group.method])(group.docs, **_kwargs(group))))
        if progress is not None:
            progress.update(len(group.docs))
    return responses


def is_reporting_rank(model: Any) -> bool:
    """Whether this process gets the responses and reports results (True off a mesh)."""
    return bool(getattr(model, "is_reporting_rank", True))
