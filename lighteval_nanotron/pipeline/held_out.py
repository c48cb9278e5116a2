"""Held-out domains in the pipeline: built once (one rank reads and tokenizes, every rank receives
the windows), planned by the model, run at every evaluation, and turned into results entries
`heldout|<name>` (plus `heldout|_micro` / `heldout|_macro` with two domains or more), details rows
(one per window), `config_tasks` (where the windows come from; the averages: their domains and
digest) and `task_costs`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set, check_sequence_length
from lighteval_nanotron.metrics.held_out import (
    BITS_PER_BYTE,
    LOSS,
    PERPLEXITY,
    domain_scores,
    macro_scores,
    micro_scores,
)
from lighteval_nanotron.models.interface import HeldOutModel, LightevalModel, missing_members
from lighteval_nanotron.pipeline.progress import EvaluationProgress
from lighteval_nanotron.pipeline.result import GENERATIVE_KEY, SampleDetail
from lighteval_nanotron.requests.held_out import (
    HELD_OUT_METHOD,
    WINDOWS_DIGEST,
    HeldOutLosses,
    HeldOutSet,
    domains_digest,
    held_out_key,
    window_digests,
)

MICRO_KEY = held_out_key("_micro")
MACRO_KEY = held_out_key("_macro")
LOWER_IS_BETTER = (LOSS, PERPLEXITY, BITS_PER_BYTE)
"""Recorded per domain in `config_tasks` (`higher_is_better`), as the signal analysis reads a metric's direction."""


@dataclass
class PreparedHeldOut:
    """Every held-out domain's windows and the model's plan of each."""

    sets: list[HeldOutSet] = field(default_factory=list)
    plans: list[Any] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return [held_out.key for held_out in self.sets]

    @property
    def digests(self) -> dict[str, str]:
        """`{results key: windows digest}`: a step is done for a domain on these windows only
        (`setup.finished_steps.is_done`)."""
        return window_digests(self.sets)

    @property
    def windows(self) -> int:
        """Windows scored per evaluation, over every domain (progress counts each as a doc)."""
        return sum(len(held_out.windows) for held_out in self.sets)


def prepare_held_out(
    model: LightevalModel, specs: Sequence[HeldOutSpec | HeldOutSet], sequence_length: int | None
) -> PreparedHeldOut:
    """Read and tokenize every domain once for the mesh (`computed_once`), then plan each on every rank.
    `sequence_length` None: the model's positions. Sets already built on every rank (`eval` builds
    them when it plans, for their digests) are only checked against the model's positions."""
    if not specs:
        return PreparedHeldOut()
    if not isinstance(model, HeldOutModel):
        raise ConfigError(
            f"Held-out loss needs the Nanotron engine (a HeldOutModel, lighteval_nanotron.models.interface); "
            f"{type(model).__name__} lacks {', '.join(missing_members(model, HeldOutModel))}."
        )
    if all(isinstance(s, HeldOutSet) for s in specs):
        sets = list(specs)
        for held_out in sets:
            check_sequence_length(held_out.name, held_out.sequence_length, model.max_length)
    else:
        length = sequence_length or model.max_length
        sets = model.computed_once(
            lambda: [build_held_out_set(s, model.tokenizer, length, model.vocab_size, model.max_length) for s in specs]
        )
    return PreparedHeldOut(sets, [model.prepare_held_out(held_out) for held_out in sets])


@dataclass
class HeldOutRun:
    losses: HeldOutLosses | None
    seconds: float


def run_held_out(
    model: LightevalModel, prepared: PreparedHeldOut, progress: EvaluationProgress | None = None, docs_before: int = 0
) -> list[HeldOutRun]:
    """Every domain's losses (on the reporting rank; None elsewhere). Every rank calls it.
    `progress` (if any) advances through the windows after `docs_before`, as micro-batches end."""
    runs = []
    for held_out, plan in zip(prepared.sets, prepared.plans, strict=True):
        start = time.perf_counter()
        if progress is None:
            answer = model.run(plan)
        else:

            def advance(done: int, total: int, base: int = docs_before, size: int = len(held_out.windows)) -> None:
                progress.advance_to(base + size * done / max(total, 1))

            answer = model.run(plan, on_micro_batch=advance)
            docs_before += len(held_out.windows)
            progress.advance_to(docs_before)
        runs.append(HeldOutRun(answer[0] if answer else None, time.perf_counter() - start))
    return runs


@dataclass
class HeldOutResults:
    results: dict[str, dict[str, float]] = field(default_factory=dict)
    details: dict[str, list[SampleDetail]] = field(default_factory=dict)
    config_tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def _detail(key: str, index: int, nll: float, targets: int, size: int) -> SampleDetail:
    return SampleDetail(
        task_name=key,
        doc_id=str(index),
        sampling_method=HELD_OUT_METHOD,
        query="",
        full_prompt="",
        choices=[],
        gold_index=[],
        gold=[],
        predictions=[],
        logprobs=[-nll],
        argmax_logits_eq_gold=[],
        unconditioned_logprobs=None,
        input_tokens=[],
        output_tokens=[],
        truncated_tokens_count=0,
        padded_tokens_count=0,
        metrics={"loss": nll / targets, "nll": nll, "tokens": targets, "bytes": size},
    )


def held_out_results(prepared: PreparedHeldOut, runs: Sequence[HeldOutRun]) -> HeldOutResults:
    """Scores, details, descriptions and costs of every domain (reporting rank). A domain whose
    losses are not finite fails alone (its reason under `failed`), and then there are no averages
    over domains (`_micro`, `_macro`): a mean over the other domains is not them."""
    out = HeldOutResults()
    directions = dict.fromkeys(LOWER_IS_BETTER, False)
    scored = {"higher_is_better": directions, GENERATIVE_KEY: False}  # generation parameters apply to nothing here
    pooled: dict[str, tuple[np.ndarray, int, np.ndarray]] = {}
    for held_out, run in zip(prepared.sets, runs, strict=True):
        key, losses = held_out.key, run.losses
        nll = losses.nll
        if not np.isfinite(nll).all():
            bad = int((~np.isfinite(nll)).sum())
            out.failed[key] = (
                f"{bad} of {len(nll)} windows got a non-finite loss from the model: check the checkpoint's weights "
                "(and the dtype: float16 overflows easily)"
            )
            continue
        per_window = losses.targets_per_window
        out.results[key] = domain_scores(nll, per_window, held_out.target_bytes)
        pooled[key] = (nll, per_window, held_out.target_bytes)
        out.details[key] = [
            _detail(key, i, float(v), per_window, int(b)) for i, (v, b) in enumerate(zip(nll, held_out.target_bytes))
        ]
        out.config_tasks[key] = {**held_out.description, **scored}
        tokens = held_out.target_tokens
        out.task_costs[key] = {
            "seconds": run.seconds,
            "docs": len(nll),
            "docs_per_s": len(nll) / run.seconds if run.seconds > 0 else 0.0,
            "processed_tokens": tokens,
            "useful_tokens": tokens,
            "tokens_per_s": tokens / run.seconds if run.seconds > 0 else 0.0,
        }
    if len(pooled) > 1 and not out.failed:  # an average without a failed domain is not the average
        out.results[MICRO_KEY] = micro_scores(pooled)
        out.results[MACRO_KEY] = macro_scores({key: out.results[key] for key in pooled})
        digests = {key: out.config_tasks[key].get(WINDOWS_DIGEST) for key in pooled}
        average = {"domains": list(pooled), **scored}
        if None not in digests.values():  # sets built by `heldout.build` record their digest
            average[WINDOWS_DIGEST] = domains_digest(digests)
        out.config_tasks.update({MICRO_KEY: average, MACRO_KEY: dict(average)})
    return out
