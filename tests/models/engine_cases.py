"""Docs and rank functions shared by the engine tests (module level, so they can be pickled)."""

from __future__ import annotations

import pickle
import time

from lighteval_nanotron.tasks.requests import Doc

MAX_LENGTH = 48
LONG_TEXT = " ".join(f"word{i} and more text" for i in range(40))


def engine_docs() -> list[Doc]:
    """Single-token and multi-token choices, few-shot, PMI queries, a doc longer than the context,
    and generation settings that differ per doc."""
    shot = Doc(query="Is water wet?", choices=[" yes", " no"], gold_index=0)
    docs = [
        Doc(
            query="Question: the sky is? Answer:",
            choices=[" A", " B", " C", " D"],
            gold_index=1,
            unconditioned_query="Answer:",
            generation_size=6,
            stop_sequences=["\n"],
        ),
        Doc(
            query="Name a colour:",
            choices=[" blue sky", " red", " green grass today"],
            gold_index=0,
            unconditioned_query="",
            generation_size=4,
        ),
        Doc(
            query="Is fire cold?",
            choices=[" yes", " no"],
            gold_index=1,
            fewshot_samples=[shot],
            generation_size=9,
            stop_sequences=["the", "\n\n"],
        ),
        Doc(query=LONG_TEXT, choices=[" end", " of text"], gold_index=0, generation_size=5),
        Doc(
            query="Count: one two three", choices=[" four"], gold_index=0, generation_size=12, stop_sequences=[" five"]
        ),
        Doc(query="x", choices=[" y", " zed zed"], gold_index=0, generation_size=3),
    ]
    shots = [shot, Doc(query="Is ice cold?", choices=[" yes", " no"], gold_index=0)]
    docs += [  # one few-shot prefix shared by two docs: packed rows compute it once
        Doc(
            query="Is the sun hot?",
            choices=[" yes", " no", " maybe so"],
            gold_index=0,
            fewshot_samples=shots,
            generation_size=4,
        ),
        Doc(
            query="Is snow warm?",
            choices=[" yes", " no"],
            gold_index=1,
            fewshot_samples=shots,
            generation_size=16,
            stop_sequences=["e", "a", "o"],
        ),
    ]
    return docs


def evaluate(checkpoint: str, tp: int, pp: int, dp: int, config: dict) -> dict:
    """Rank function: load the checkpoint at (tp, pp, dp), run all three request kinds."""
    from lighteval_nanotron.models.nanotron import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.models.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.parallel.mesh import record_gather_bytes
    from lighteval_nanotron.parallel.vocab_parallel import record_logits_width
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    config = {"gather_to": "all", **config}  # every rank's responses are checked, unless a test asks otherwise
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig(max_length=MAX_LENGTH, **config))
    docs = engine_docs()
    with record_logits_width() as widths:
        start = time.perf_counter()
        with record_gather_bytes() as gathered:
            loglikelihood = engine.loglikelihood(docs, unconditioned=True)
        rolling = engine.loglikelihood_rolling(docs)
        generation_plan = engine.prepare_generation(docs)
        generation = engine.run(generation_plan)
        seconds = time.perf_counter() - start
    plan = engine.prepare_loglikelihood(docs, unconditioned=True)
    return {
        "plan_stats": plan.stats,
        "generation_stats": generation_plan.stats,
        "loglikelihood": loglikelihood,
        "rolling": rolling,
        "generation": generation,
        "max_logits_width": widths.max_width,
        "logits_tensors": widths.count,
        "reporting": engine.is_reporting_rank,
        "seconds": seconds,
        "loglikelihood_gather": gathered,
        "dense_payload_bytes": len(pickle.dumps(([s + 0.5 for s in range(plan.num_slots)], [0] * plan.num_slots))),
    }


def evaluate_with_failing_rank(checkpoint: str, tp: int, pp: int, dp: int) -> None:
    """Rank function: world rank 1's prompt function raises in the middle of preparing."""
    import torch.distributed as dist

    from lighteval_nanotron.models.nanotron import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.models.nanotron_builder import load_nanotron_checkpoint
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)

    def prompt(doc: Doc) -> str:
        if dist.get_rank() == 1 and doc.query == "x":
            raise RuntimeError("prompt function failed on purpose")
        return doc.query

    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig(max_length=MAX_LENGTH), prompt)
    engine.loglikelihood(engine_docs())
