"""One evaluation step, the same for every way in: the training hook (in the loop; its
asynchronous evaluations are `eval` jobs), `eval` (one checkpoint, a backfill, a watched folder)
and `evaluate()`.

    step = StepEvaluator(pipeline, options, model, parallel_context, loggers, signal)
    step.check(10)                           # before a load: refused if step 10 holds another identity
    result = step.evaluate(10, tokens=...)   # fingerprint, check, run, record, signal, log, raise

A step's identity is what its scores depend on besides each task's data (recorded per task, as
`docs_sha256` or `windows_sha256`): the options declared `scores("value")` (`options.base.scores`)
and the engine's, the prompt and decoding settings the pipeline records, the model's dtype and the
weights' fingerprint. It is written in `config_general.identity` and decides every skip, merge and
refusal (`setup.finished_steps`, `tracking.results_file`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from lighteval_nanotron.analysis import LiveSignal
from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.options.base import score_values
from lighteval_nanotron.pipeline import EvaluationPipeline
from lighteval_nanotron.pipeline.result import WEIGHTS_KEY, EvaluationResult, raise_for_failed_tasks
from lighteval_nanotron.setup.finished_steps import check_done_step, check_step_settings
from lighteval_nanotron.tracking import LoggerContainer
from lighteval_nanotron.tracking.results_file import IDENTITY_KEY

DTYPE_KEY = "dtype"


def run_identity(
    options: EvaluationOptions, engine_config: Any, prompt_settings: Mapping[str, Any], dtype: str | None
) -> dict[str, Any]:
    """A run's identity without the weights: the options' and the engine config's declared values,
    the prompt and decoding settings (`EvaluationPipeline.settings`, `PromptManager.settings`) and
    the dtype, as plain JSON values (the file's, read back, compare equal)."""
    identity = score_values(options)
    if dataclasses.is_dataclass(engine_config):
        identity.update(score_values(engine_config))
    identity.update(prompt_settings)
    if dtype is not None:
        identity[DTYPE_KEY] = dtype
    return json.loads(json.dumps(identity, default=lambda value: getattr(value, "as_dict", lambda: str(value))()))


def model_dtype(model: Any) -> str | None:
    """The dtype of `model`'s weights (`bfloat16`, ...), None for a model without parameters."""
    parameter = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    return None if parameter is None else str(parameter.dtype).removeprefix("torch.")


@dataclasses.dataclass
class StepEvaluator:
    """Evaluates the model's current weights at a step and records the result, with its identity."""

    pipeline: EvaluationPipeline
    options: EvaluationOptions
    model: Any = None
    """The Nanotron model whose weights are fingerprinted; None for a model interface alone."""
    parallel_context: Any = None
    loggers: LoggerContainer | None = None
    """The results loggers on the reporting rank (`setup.loggers.open_loggers`), None elsewhere."""
    signal: LiveSignal | None = None
    """The run's `analysis.LiveSignal` on the reporting rank, None elsewhere."""
    writes: bool = True
    """Whether results go to `options.output_dir` (then a step is checked against its file there)."""

    def __post_init__(self) -> None:
        self.dtype = model_dtype(self.model) if self.model is not None else None
        engine_config = getattr(self.pipeline.model, "config", None)
        self.identity = run_identity(self.options, engine_config, self.pipeline.settings, self.dtype)
        """This run's identity without the weights (the same on every rank)."""

    @property
    def world(self) -> Any:
        return None if self.parallel_context is None else self.parallel_context.world_pg

    def fingerprint(self) -> str | None:
        """The weights' fingerprint (collective), None without a Nanotron model."""
        if self.model is None:
            return None
        from lighteval_nanotron.models.weights_fingerprint import weights_fingerprint

        return weights_fingerprint(self.model, self.parallel_context)

    def identity_with(self, weights: str | None) -> dict[str, Any]:
        return self.identity if weights is None else {**self.identity, WEIGHTS_KEY: weights}

    def check(self, step: int | None, weights: str | None = None) -> None:
        """Refuse (every rank, collective) a step whose results file holds another identity."""
        if step is not None and self.writes and "json" in self.options.loggers:
            options, names = self.options, self.pipeline.result_names
            check_step_settings(
                options.output_dir, self.pipeline.model_name, step, self.identity_with(weights), names, self.world
            )

    def check_done(self, step: int) -> None:
        """Refuse (every rank, collective) a step skipped as done whose results are of other weights."""
        weights = self.fingerprint()
        check_done_step(
            self.options.output_dir, self.pipeline.model_name, step, self.identity_with(weights), self.world
        )

    def evaluate(
        self,
        step: int | None,
        tokens: int | None = None,
        samples: int | None = None,
        record: Callable[[EvaluationResult], Mapping[str, Any]] | None = None,
        on_result: Callable[[EvaluationResult], None] | None = None,
        guard: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    ) -> EvaluationResult | None:
        """Fingerprint, check against the step's file, run (inside `guard()`), record the identity
        and what `record(result)` gives in `config_general`, attach the signal, log, call `on_result`, and raise
        `EvaluationError` for failed tasks once the others are written. Every rank calls it; the
        reporting rank gets the result, the others None."""
        weights = self.fingerprint()
        self.check(step, weights)  # before the forwards: nothing written for a refused step
        with guard():
            result = self.pipeline.run(step=step, consumed_tokens=tokens, consumed_train_samples=samples)
        if result is None:
            return None
        identity = self.identity_with(weights)
        result.extra_config.update(record(result) if record is not None else {})
        result.extra_config.update({key: identity[key] for key in (WEIGHTS_KEY, DTYPE_KEY) if key in identity})
        result.extra_config[IDENTITY_KEY] = identity
        if self.signal is not None:
            self.signal.attach(result)
        if self.loggers is not None:
            self.loggers.log(result)
        if on_result is not None:
            on_result(result)
        raise_for_failed_tasks(result)
        return result
