"""The one place that knows how the pipeline talks to a model.

Any `LightevalModel` works: its three request methods run at every evaluation. A model that
also offers the engine's prepare-once split (`prepare_loglikelihood`, `prepare_rolling`,
`prepare_generation` and `run(plan)`, as `NanotronLightevalModel` does) gets its plans built
once, in `prepare_requests`, and only `run(plan)` is called per evaluation.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.pipeline.request_groups import RequestGroup
from lighteval_nanotron.requests import ModelResponse, SamplingMethod

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


@dataclass
class GroupRun:
    """One group's responses, the seconds its model call took, and per doc the token positions
    computed and the useful tokens (the model's own counts, else counted from the responses)."""

    responses: list[ModelResponse]
    seconds: float
    processed_tokens: list[float]
    useful_tokens: list[int]


def response_tokens(method: SamplingMethod, response: ModelResponse) -> int:
    """A doc's tokens as its response tells them: context once plus every continuation or
    generation (PERPLEXITY: the text, which is both input and scored output)."""
    if method is SamplingMethod.PERPLEXITY:
        return len(response.input_tokens)
    return len(response.input_tokens) + sum(len(tokens) for tokens in response.output_tokens)


def _doc_tokens(
    model: Any, group: RequestGroup, plan: Any, responses: list[ModelResponse]
) -> tuple[list[float], list[int]]:
    counted = getattr(model, "doc_tokens", None)
    if plan is not None and callable(counted):
        return counted(plan)
    useful = [response_tokens(group.method, response) for response in responses]
    return [float(n + r.padded_tokens_count) for n, r in zip(useful, responses)], useful


def run_requests(model: Any, prepared: PreparedRequests, progress: Any = None) -> list[GroupRun]:
    """The model's responses, one run per group. Every rank must call this together.
    `progress` (a tqdm bar, if any) advances by each group's docs as the group is done."""
    runs = []
    for group, plan in zip(prepared.groups, prepared.plans, strict=True):
        start = time.perf_counter()
        if plan is not None:
            responses = list(model.run(plan))
        else:
            responses = list(getattr(model, MODEL_CALLS[group.method])(group.docs, **_kwargs(group)))
        seconds = time.perf_counter() - start
        processed, useful = _doc_tokens(model, group, plan, responses) if responses else ([], [])
        runs.append(GroupRun(responses, seconds, processed, useful))
        if progress is not None:
            progress.update(len(group.docs))
    return runs


def is_reporting_rank(model: Any) -> bool:
    """Whether this process gets the responses and reports results (True off a mesh)."""
    return bool(getattr(model, "is_reporting_rank", True))
