"""`evaluate(...)`: prepare, run once and write the results, in one call (the pipeline, then the
loggers of `tracking`; `lighteval_nanotron.evaluate` is this function).

    from lighteval_nanotron import evaluate
    result = evaluate(llama, parallel_context, tokenizer, tasks="lighteval|arc:easy|0",
                      max_samples=200, output_dir="eval_results", step=trainer.iteration_step)

For repeated evaluations (every N training steps) keep an `EvaluationPipeline` instead: it
prepares docs and the engine's batch plans once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.interface import LightevalModel
from lighteval_nanotron.pipeline.pipeline import EvaluationPipeline, TaskSelection
from lighteval_nanotron.pipeline.result import WEIGHTS_KEY, EvaluationResult
from lighteval_nanotron.pipeline.settings import PipelineSettings

logger = logging.getLogger(__name__)


def as_engine(model: Any, parallel_context: Any = None, tokenizer: Any = None, engine_config: Any = None) -> Any:
    """`model` itself when it already is a `LightevalModel`, else the Nanotron engine built
    over a Nanotron model, its `ParallelContext` and a tokenizer."""
    if isinstance(model, LightevalModel):
        if parallel_context is not None or tokenizer is not None:
            raise ConfigError(
                f"{type(model).__name__} is already an evaluation model: pass it without "
                "parallel_context / tokenizer (those build one from a raw Nanotron model)."
            )
        return model
    if parallel_context is None or tokenizer is None:
        raise ConfigError(
            f"{type(model).__name__} is not a LightevalModel: pass the Nanotron model with its "
            "parallel_context and tokenizer, so that the Nanotron engine can drive it."
        )
    from lighteval_nanotron.models.engine import NanotronLightevalModel

    return NanotronLightevalModel(model, parallel_context, tokenizer, engine_config)


def evaluate(
    model: Any,
    parallel_context: Any = None,
    tokenizer: Any = None,
    *,
    tasks: TaskSelection,
    max_samples: int | None = None,
    custom_tasks: str | Path | ModuleType | None = None,
    model_name: str | None = None,
    output_dir: str | Path | None = None,
    loggers: Sequence[str] = ("json", "details"),
    step: int | None = None,
    consumed_tokens: int | None = None,
    consumed_train_samples: int | None = None,
    engine_config: Any = None,
    bootstrap_iters: int | None = None,
) -> EvaluationResult | None:
    """Evaluate `model` on `tasks` once. Every rank of the mesh calls it; the reporting rank
    writes to `output_dir` (when given, with `loggers` among json, details, tensorboard, wandb)
    and gets the `EvaluationResult`, the other ranks None."""
    engine = as_engine(model, parallel_context, tokenizer, engine_config)
    settings = PipelineSettings(
        max_samples=max_samples, custom_tasks=custom_tasks, model_name=model_name, bootstrap_iters=bootstrap_iters
    )
    pipeline = EvaluationPipeline.prepare(engine, tasks, settings)
    weights = None
    if parallel_context is not None:  # a raw Nanotron model: its weights are named in the results
        from lighteval_nanotron.models.weights_fingerprint import weights_fingerprint

        weights = weights_fingerprint(model, parallel_context)
        if output_dir is not None and step is not None and "json" in loggers:  # refused before the forwards
            from lighteval_nanotron.setup.finished_steps import check_step_settings

            settings = {**pipeline.settings, WEIGHTS_KEY: weights}
            world = parallel_context.world_pg
            check_step_settings(str(output_dir), pipeline.model_name, step, settings, pipeline.result_names, world)
    result = pipeline.run(step=step, consumed_tokens=consumed_tokens, consumed_train_samples=consumed_train_samples)
    if result is not None and weights is not None:
        result.extra_config[WEIGHTS_KEY] = weights
    if result is not None and output_dir is not None:
        from lighteval_nanotron.analysis import LiveSignal
        from lighteval_nanotron.tracking import TrackingConfig, format_results_table

        LiveSignal(output_dir, result.model_name).attach(result)  # the run's results there, then this one
        tracker = TrackingConfig(output_dir=str(output_dir), loggers=list(loggers)).build()
        try:
            tracker.log(result)
        finally:
            tracker.close()
        logger.info("\n%s", format_results_table(result))
    return result
