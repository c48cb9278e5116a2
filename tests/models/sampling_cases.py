"""Rank function of the sampling tests (module level, so it can be pickled)."""

from __future__ import annotations

import dataclasses

from tests.models.engine_cases import MAX_LENGTH, engine_docs


def sampling_docs() -> list:
    """The engine docs with identities (a sample's seed includes the task name and doc id)."""
    return [dataclasses.replace(doc, task_name="t|gen", id=str(i)) for i, doc in enumerate(engine_docs())]


def generate(checkpoint: str, tp: int, pp: int, dp: int, generation: dict, config: dict) -> dict:
    """Load the checkpoint at (tp, pp, dp) and generate the sampling docs; every rank returns all."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    engine_config = EngineConfig(max_length=MAX_LENGTH, gather_to="all", generation=generation, **config)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), engine_config)
    plan = engine.prepare_generation(sampling_docs())
    responses = engine.run(plan)
    return {"tokens": [r.output_tokens for r in responses], "texts": [r.text for r in responses]}


def run_generate(checkpoint, tp: int, pp: int, dp: int, generation: dict, **config) -> list[dict]:
    from tests.helpers.distributed import run_distributed

    return run_distributed(generate, tp * pp * dp, str(checkpoint), tp, pp, dp, generation, config, timeout=180)
