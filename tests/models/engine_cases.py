"""Docs and rank functions shared by the engine tests (module level, so they can be pickled)."""

from __future__ import annotations

import pickle
import time

import pytest

from lighteval_nanotron.requests import Doc

MAX_LENGTH = 48
TOLERANCE = 1e-4
RELATIVE = 1e-6  # sums of hundreds of fp32 log-probs: different kernels round differently
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


def _model_settings(tp: int, pp: int, dp: int, model: dict | None) -> tuple[object, object]:
    """(dtype, ParallelismArgs) of `model`: {"dtype": "bfloat16", "tp_mode": "REDUCE_SCATTER",
    "async": True}; None: the checkpoint's dtype, ALL_REDUCE."""
    import torch
    from nanotron.config import ParallelismArgs

    model = model or {}
    dtype = getattr(torch, model["dtype"]) if "dtype" in model else None
    tp_mode = model.get("tp_mode", "ALL_REDUCE")
    args = ParallelismArgs(
        dp=dp, pp=pp, tp=tp, tp_mode=tp_mode, tp_linear_async_communication=bool(model.get("async", False))
    )
    return dtype, args


def _tp_state(model) -> list[tuple[str, object, object]]:
    return [
        (name, m.mode, getattr(m, "async_communication", None))
        for name, m in model.named_modules()
        if hasattr(m, "mode") and type(m.mode).__name__ == "TensorParallelLinearMode"
    ]


def evaluate(checkpoint: str, tp: int, pp: int, dp: int, config: dict, model: dict | None = None) -> dict:
    """Rank function: load the checkpoint at (tp, pp, dp) (`model`: dtype and TP mode, see
    `_model_settings`), run all three request kinds. `lm_head_positions`: positions whose logits
    this rank's `lm_head` computed, per request kind."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.parallel.mesh import record_gather_bytes
    from lighteval_nanotron.parallel.vocab_parallel import record_logits_width
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    dtype, parallel_config = _model_settings(tp, pp, dp, model)
    llama, _ = load_nanotron_checkpoint(checkpoint, context, dtype=dtype, parallel_config=parallel_config)
    tp_state = _tp_state(llama)
    positions = {"current": "", "counts": {}}

    def count_positions(_module, _inputs, output) -> None:
        kind = positions["current"]
        positions["counts"][kind] = positions["counts"].get(kind, 0) + output.shape[0] * output.shape[1]

    lm_head = getattr(llama.model.lm_head, "pp_block", None)
    if lm_head is not None:
        lm_head.register_forward_hook(count_positions)
    config = {"gather_to": "all", **config}  # every rank's responses are checked, unless a test asks otherwise
    engine = NanotronLightevalModel(llama, context, tiny_tokenizer(), EngineConfig(max_length=MAX_LENGTH, **config))
    docs = engine_docs()
    with record_logits_width() as widths:
        start = time.perf_counter()
        positions["current"] = "loglikelihood"
        with record_gather_bytes() as gathered:
            loglikelihood = engine.loglikelihood(docs, unconditioned=True)
        positions["current"] = "rolling"
        rolling = engine.loglikelihood_rolling(docs)
        positions["current"] = "generation"
        generation_plan = engine.prepare_generation(docs)
        generation = engine.run(generation_plan)
        seconds = time.perf_counter() - start
    plan = engine.prepare_loglikelihood(docs, unconditioned=True)
    return {
        "placement": _placement(llama),
        "plan_stats": plan.stats,
        "generation_stats": generation_plan.stats,
        "loglikelihood": loglikelihood,
        "rolling": rolling,
        "generation": generation,
        "max_logits_width": widths.max_width,
        "logits_tensors": widths.count,
        "reporting": engine.is_reporting_rank,
        "seconds": seconds,
        "lm_head_positions": positions["counts"] if lm_head is not None else None,
        "tp_state_restored": _tp_state(llama) == tp_state,
        "tp_modes": sorted({str(mode.name) for _, mode, _ in tp_state}),
        "param_dtypes": sorted({str(p.dtype) for p in llama.parameters()}),
        "loglikelihood_gather": gathered,
        "dense_payload_bytes": len(pickle.dumps(([s + 0.5 for s in range(plan.num_slots)], [0] * plan.num_slots))),
    }


def _placement(model) -> dict[int, list[str]]:
    """The pipeline rank of each of the model's `PipelineBlock`s (`emb`, `L0`.., `norm`, `head`,
    `cast`), as Nanotron placed them: {pp rank: blocks in forward order}."""
    from nanotron.parallel.pipeline_parallel.block import PipelineBlock

    short = {
        "token_position_embeddings": "emb",  # Llama, Qwen2
        "token_embeddings": "emb",  # Starcoder2
        "embeds_dropout": "dropout",
        "final_layer_norm": "norm",
        "lm_head": "head",
        "cast_to_fp32": "cast",
    }
    placement: dict[int, list[str]] = {}
    for name, module in model.model.named_modules():  # the inner model: the training model's loss is one too
        if isinstance(module, PipelineBlock):
            last = name.split(".")[-1]
            placement.setdefault(module.rank, []).append(short.get(last, f"L{last}"))
    return placement


def evaluate_with_failing_rank(checkpoint: str, tp: int, pp: int, dp: int) -> None:
    """Rank function: world rank 1's prompt function raises in the middle of preparing."""
    import torch.distributed as dist

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
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


def run_engine(checkpoint, tp: int, pp: int, dp: int, model: dict | None = None, **config) -> list[dict]:
    """`evaluate` on tp * pp * dp gloo processes; one result per rank."""
    from tests.helpers.distributed import run_distributed

    return run_distributed(evaluate, tp * pp * dp, str(checkpoint), tp, pp, dp, config, model, timeout=180)


def assert_same(
    result: dict, expected: dict, tolerance: float = TOLERANCE, relative: float = RELATIVE, generations: bool = True
) -> None:
    """Same log-probs (to `tolerance` or `relative`), greedy flags, tokens and (`generations`) texts."""
    for kind in ("loglikelihood", "rolling"):
        for got, want in zip(result[kind], expected[kind], strict=True):
            assert got.logprobs == pytest.approx(want.logprobs, abs=tolerance, rel=relative)
            assert got.argmax_logits_eq_gold == want.argmax_logits_eq_gold
            assert got.output_tokens == want.output_tokens
            assert got.truncated_tokens_count == want.truncated_tokens_count
            if want.unconditioned_logprobs is None:
                assert got.unconditioned_logprobs is None
            else:
                assert got.unconditioned_logprobs == pytest.approx(
                    want.unconditioned_logprobs, abs=tolerance, rel=relative
                )
    if not generations:
        return
    for got, want in zip(result["generation"], expected["generation"], strict=True):
        assert got.output_tokens == want.output_tokens
        assert got.text == want.text
        assert got.truncated_tokens_count == want.truncated_tokens_count
