"""The one place that knows how the pipeline talks to a model (`models.interface`).

Any `LightevalModel` works: its three request methods run at every evaluation. A `PlanningModel`
(the Nanotron engine: `prepare_loglikelihood`, `prepare_rolling`, `prepare_generation` and
`run(plan)`) gets its plans built once, in `prepare_requests`, and only `run(plan)` is called per
evaluation. What a model cannot do is refused here, when the pipeline prepares.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.interface import LightevalModel, PlanningModel, missing_members
from lighteval_nanotron.pipeline.progress import EvaluationProgress
from lighteval_nanotron.pipeline.request_groups import RequestGroup
from lighteval_nanotron.pipeline.truncation import report_truncation
from lighteval_nanotron.requests import ModelResponse, SamplingMethod


@dataclass
class PreparedRequests:
    """The request groups and, for a planning model, one plan per group (else None)."""

    groups: list[RequestGroup]
    plans: list[Any]


def check_model(model: Any) -> None:
    """ConfigError naming what `model` lacks when it is not a `LightevalModel`."""
    if not isinstance(model, LightevalModel):
        raise ConfigError(
            f"{type(model).__name__} is not a LightevalModel (lighteval_nanotron.models.interface): it lacks "
            f"{', '.join(missing_members(model, LightevalModel))}. Subclass LightevalModel (its defaults fill in "
            "the attributes), or pass a Nanotron model through NanotronLightevalModel."
        )


def _check_unconditioned(model: LightevalModel, groups: list[RequestGroup]) -> None:
    if any(group.unconditioned for group in groups) and not model.supports_unconditioned:
        raise ConfigError(
            f"A task uses a PMI metric, which needs unconditioned log-probabilities, but "
            f"{type(model).__name__} does not score them (supports_unconditioned is False): use a model "
            "that supports it (e.g. NanotronLightevalModel) or drop the PMI metric."
        )


def _prepare(model: PlanningModel, group: RequestGroup) -> Any:
    if group.method is SamplingMethod.LOGPROBS:
        if group.unconditioned:
            return model.prepare_loglikelihood(group.docs, unconditioned=True)
        return model.prepare_loglikelihood(group.docs)
    if group.method is SamplingMethod.PERPLEXITY:
        return model.prepare_rolling(group.docs)
    return model.prepare_generation(group.docs)


def _call(model: LightevalModel, group: RequestGroup) -> list[ModelResponse]:
    if group.method is SamplingMethod.LOGPROBS:
        if group.unconditioned:
            return model.loglikelihood(group.docs, unconditioned=True)
        return model.loglikelihood(group.docs)
    if group.method is SamplingMethod.PERPLEXITY:
        return model.loglikelihood_rolling(group.docs)
    return model.greedy_until(group.docs)


def prepare_requests(model: LightevalModel, groups: list[RequestGroup]) -> PreparedRequests:
    """Build the model's plans (prompts, tokens, batches) once, when it is a `PlanningModel`."""
    _check_unconditioned(model, groups)
    if not isinstance(model, PlanningModel):
        return PreparedRequests(groups, [None] * len(groups))
    plans = [_prepare(model, group) for group in groups]
    report_truncation(model, groups, plans)
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
    model: LightevalModel, group: RequestGroup, plan: Any, responses: list[ModelResponse]
) -> tuple[list[float], list[int]]:
    counted = model.doc_tokens(plan) if plan is not None and isinstance(model, PlanningModel) else None
    if counted is not None:
        return counted
    useful = [response_tokens(group.method, response) for response in responses]
    return [float(n + r.padded_tokens_count) for n, r in zip(useful, responses)], useful


def run_requests(
    model: LightevalModel, prepared: PreparedRequests, progress: EvaluationProgress | None = None
) -> list[GroupRun]:
    """The model's responses, one run per group. Every rank must call this together.
    `progress` (an `EvaluationProgress`, if any) advances through each group's docs as this rank's
    micro-batches end (the share of the group's micro-batches done), else when the group is done."""
    runs = []
    docs_before = 0
    for group, plan in zip(prepared.groups, prepared.plans, strict=True):
        start = time.perf_counter()
        if plan is None:
            responses = list(_call(model, group))
        elif progress is None:
            responses = list(model.run(plan))
        else:

            def advance(done: int, total: int, base: int = docs_before, size: int = len(group.docs)) -> None:
                progress.advance_to(base + size * done / max(total, 1))

            responses = list(model.run(plan, on_micro_batch=advance))
        seconds = time.perf_counter() - start
        processed, useful = _doc_tokens(model, group, plan, responses) if responses else ([], [])
        runs.append(GroupRun(responses, seconds, processed, useful))
        docs_before += len(group.docs)
        if progress is not None:
            progress.advance_to(docs_before)
    return runs
