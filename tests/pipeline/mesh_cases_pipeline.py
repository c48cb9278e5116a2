"""Rank functions of the pipeline's Nanotron test (module level, so they can be pickled)."""

from __future__ import annotations

import os


def evaluate_on_mesh(checkpoint: str, data_dir: str, out_dir: str, tp: int, pp: int, dp: int) -> dict | None:
    """Rank function: `evaluate(llama, parallel_context, tokenizer, ...)` on the tiny checkpoint."""
    import helpers_pipeline

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.evaluate_once import evaluate
    from lighteval_nanotron.models.engine import EngineConfig
    from lighteval_nanotron.tasks.data_dirs import ENV_VAR
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    os.environ[ENV_VAR] = data_dir
    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    result = evaluate(
        model,
        context,
        tiny_tokenizer(),
        tasks=helpers_pipeline.ALL_TOY_TASKS,
        custom_tasks=helpers_pipeline,
        model_name="tiny",
        output_dir=out_dir,
        step=7,
        engine_config=EngineConfig(max_length=64),
    )
    return None if result is None else result.results


def evaluate_sampled_on_mesh(checkpoint: str, data_dir: str, tp: int, pp: int, dp: int) -> tuple | None:
    """Rank function: the sampled toy task through `evaluate`; (results, every doc's samples)."""
    import helpers_pipeline

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.evaluate_once import evaluate
    from lighteval_nanotron.models.engine import EngineConfig
    from lighteval_nanotron.tasks.data_dirs import ENV_VAR
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    os.environ[ENV_VAR] = data_dir
    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    result = evaluate(
        model,
        context,
        tiny_tokenizer(),
        tasks="custom|toy_sampled|0",
        custom_tasks=helpers_pipeline,
        model_name="tiny",
        output_dir=None,
        engine_config=EngineConfig(max_length=64),
    )
    if result is None:
        return None
    return result.results, [(d.predictions, d.gold, d.metrics) for d in result.details["custom|toy_sampled|0"]]


BUILTIN_TASKS = "lighteval|arc:easy|0,lighteval|piqa|0,lighteval|triviaqa|0"


def evaluate_builtin_tasks(checkpoint: str, tp: int, pp: int, dp: int) -> dict | None:
    """Rank function: built-in tasks on the bundled slices, through `evaluate`, at one layout."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.evaluate_once import evaluate
    from lighteval_nanotron.models.engine import EngineConfig
    from lighteval_nanotron.tasks import set_data_dirs
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    set_data_dirs(["bundled"])
    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    result = evaluate(
        model,
        context,
        tiny_tokenizer(),
        tasks=BUILTIN_TASKS,
        max_samples=6,
        model_name="tiny",
        engine_config=EngineConfig(max_length=256, default_max_new_tokens=8),
    )
    return None if result is None else result.results


def evaluate_into_a_step(checkpoint: str, data_dir: str, out_dir: str, tasks: str) -> str | None:
    """Rank function: `evaluate(...)` of `checkpoint` on the tiny Llama at DP2 into step 7 of `out_dir`;
    the type and text of the error it raised, None when it wrote."""
    import helpers_pipeline

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.evaluate_once import evaluate
    from lighteval_nanotron.models.engine import EngineConfig
    from lighteval_nanotron.tasks.data_dirs import ENV_VAR
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    os.environ[ENV_VAR] = data_dir
    context = parallel_context(1, 1, 2)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    try:
        evaluate(
            model, context, tiny_tokenizer(), tasks=tasks, custom_tasks=helpers_pipeline, model_name="tiny",
            output_dir=out_dir, step=7, engine_config=EngineConfig(max_length=64),
        )  # fmt: skip
    except Exception as error:  # noqa: BLE001 - the test reads what each rank raised
        return f"{type(error).__name__}: {error}"
    return None
