"""Rank functions of the pipeline's Nanotron test (module level, so they can be pickled)."""

from __future__ import annotations

import os


def evaluate_on_mesh(checkpoint: str, data_dir: str, out_dir: str, tp: int, pp: int, dp: int) -> dict | None:
    """Rank function: `evaluate(llama, parallel_context, tokenizer, ...)` on the tiny checkpoint."""
    import helpers_pipeline

    from lighteval_nanotron.models.nanotron import EngineConfig
    from lighteval_nanotron.models.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.pipeline import evaluate
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
