"""`evaluate(...)`: prepare, run once and write the results, in one call, through the step path
the training hook and `eval` take (`setup.step`); `lighteval_nanotron.evaluate` is this function.

    from lighteval_nanotron import evaluate
    result = evaluate(llama, parallel_context, tokenizer, tasks="lighteval|arc:easy|0",
                      max_samples=200, output_dir="eval_results", step=trainer.iteration_step)

Its options are `EvaluationOptions` (docs/options.md), checked as the hook and `eval` check them, and
its results record the same identity. For repeated evaluations (every N training steps) keep an
`EvaluationPipeline` instead: it prepares docs and the engine's batch plans once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
from lighteval_nanotron.models.interface import LightevalModel
from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.pipeline import load_tasks
from lighteval_nanotron.pipeline.pipeline import TaskSelection
from lighteval_nanotron.pipeline.result import EvaluationResult

logger = logging.getLogger(__name__)

_OWN = ("tasks", "custom_tasks", "output_dir", "loggers")
"""`EvaluationOptions` fields `evaluate` takes as its own keywords (they accept more there)."""


def as_engine(
    model: Any,
    parallel_context: Any = None,
    tokenizer: Any = None,
    engine_config: EngineConfig | None = None,
    options: EvaluationOptions | None = None,
) -> Any:
    """`model` itself when it already is a `LightevalModel`, else the Nanotron engine built
    over a Nanotron model, its `ParallelContext` and a tokenizer (`engine_config`, else the one
    `options` give; prompts rendered as `options` say)."""
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
    from lighteval_nanotron.setup.engine import engine_config as options_engine_config
    from lighteval_nanotron.setup.engine import prompt_manager

    if options is None:
        return NanotronLightevalModel(model, parallel_context, tokenizer, engine_config)
    config = engine_config or options_engine_config(options)
    prompts = prompt_manager(options, tokenizer)
    return NanotronLightevalModel(model, parallel_context, tokenizer, config, prompt_fn=prompts.prepare_prompt)


def evaluation_options(
    tasks: TaskSelection,
    custom_tasks: str | Path | ModuleType | None,
    output_dir: str | Path | None,
    loggers: Sequence[str],
    options: Mapping[str, Any],
) -> EvaluationOptions:
    """`evaluate`'s keywords as `EvaluationOptions`, checked as the hook's section and `eval`'s flags
    are; results are written only with an `output_dir` (else no logger)."""
    known = {field.name for field in dataclasses.fields(EvaluationOptions)} - set(_OWN)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"evaluate() got unknown option(s) {unknown}: use the options of docs/options.md.")
    names = list(tasks) if isinstance(tasks, Mapping) else str(tasks) if isinstance(tasks, Path) else tasks
    return EvaluationOptions(
        tasks=names if isinstance(names, str) else list(names),
        custom_tasks=str(custom_tasks) if isinstance(custom_tasks, (str, Path)) else None,
        output_dir=str(output_dir) if output_dir is not None else "eval_results",
        loggers=list(loggers) if output_dir is not None else [],
        **options,
    )


def evaluate(
    model: Any,
    parallel_context: Any = None,
    tokenizer: Any = None,
    *,
    tasks: TaskSelection,
    custom_tasks: str | Path | ModuleType | None = None,
    output_dir: str | Path | None = None,
    loggers: Sequence[str] = ("json", "details"),
    step: int | None = None,
    consumed_tokens: int | None = None,
    consumed_train_samples: int | None = None,
    engine_config: EngineConfig | None = None,
    **options: Any,
) -> EvaluationResult | None:
    """Evaluate `model` on `tasks` once. Every rank of the mesh calls it; the reporting rank
    writes to `output_dir` (when given, with `loggers` among json, details, tensorboard, wandb)
    and gets the `EvaluationResult`, the other ranks None. `options`: any `EvaluationOptions`
    (`max_samples`, `model_name`, `bootstrap_iters`, `use_chat_template`, `pairwise_tokenization`,
    ...: docs/options.md). Failed tasks raise `EvaluationError` once the others are written, on
    every rank of a Nanotron model's mesh."""
    from lighteval_nanotron.setup.loggers import open_loggers
    from lighteval_nanotron.setup.step import StepEvaluator
    from lighteval_nanotron.setup.tasks import prepare_pipeline, use_data_dirs
    from lighteval_nanotron.tracking import format_results_table

    settings = evaluation_options(tasks, custom_tasks, output_dir, loggers, options)
    engine = as_engine(model, parallel_context, tokenizer, engine_config, settings)
    use_data_dirs(settings)
    module = custom_tasks if isinstance(custom_tasks, ModuleType) else settings.custom_tasks
    selection = tasks if isinstance(tasks, Mapping) else settings.tasks
    loaded = load_tasks(selection, module, settings.fewshot_draws) if settings.tasks else {}
    name = settings.model_name or engine.model_name or "model"
    pipeline = prepare_pipeline(engine, loaded, settings, str(name))
    writes = output_dir is not None
    tracker = open_loggers(engine, settings) if writes else None
    signal = None
    if tracker is not None:
        from lighteval_nanotron.analysis import LiveSignal

        signal = LiveSignal(settings.output_dir, pipeline.model_name)  # the run's results there, then this one
    nanotron = model if parallel_context is not None else None
    evaluator = StepEvaluator(pipeline, settings, nanotron, parallel_context, tracker, signal, writes=writes)
    try:
        if parallel_context is None:
            result = evaluator.evaluate(step, consumed_tokens, consumed_train_samples)
        else:
            from lighteval_nanotron.parallel.agreement import collectively

            result = collectively(
                parallel_context.world_pg,
                "evaluate()",
                lambda: evaluator.evaluate(step, consumed_tokens, consumed_train_samples),
                timeout_hint="Raise failure_timeout_s if evaluation is just slow.",
                timeout_s=settings.failure_timeout_s,
            )
    finally:
        if tracker is not None:
            tracker.close()
    if result is not None and writes:
        logger.info("\n%s", format_results_table(result))
    return result
