"""Rank functions of the pipeline failure tests (module level, so they can be pickled)."""

from __future__ import annotations

import time

from tests.models.engine_cases import MAX_LENGTH, engine_docs

FAILURE = "a kernel failed (raised on purpose by the test)"
OUT_OF_MEMORY = "CUDA out of memory (raised on purpose by the test)"


def _engine(checkpoint: str, tp: int, pp: int):
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    # small packed rows: several scoring micro-batches, so a failure leaves some in flight
    config = EngineConfig(max_length=MAX_LENGTH, gather_to="all", pack_width=16, tokens_per_batch=64)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), config)
    return context, model, engine


def _answers(engine, kind: str, source: str | None) -> list:
    docs = engine_docs()
    if kind == "generation":
        return [r.output_tokens for r in engine.greedy_until(docs)]
    if kind == "held_out":
        from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set

        spec = HeldOutSpec(name="web", path=source, tokens=8 * 32)
        held_out = engine.computed_once(
            lambda: build_held_out_set(spec, engine.tokenizer, 32, engine.vocab_size, engine.max_length)
        )
        plan = engine.prepare_held_out(held_out)
        assert len(plan.batches) >= 4, len(plan.batches)
        (losses,) = engine.run(plan)
        return [(losses.nll.tolist(), [])]
    plan = engine.prepare_loglikelihood(docs)
    assert len(plan.batches) >= 4, len(plan.batches)  # a failure at the 2nd leaves micro-batches in flight
    return [(r.logprobs, r.argmax_logits_eq_gold) for r in engine.run(plan)]


def fail_on_output_stage(
    checkpoint: str, tp: int, pp: int, kind: str, fail_at: int, source: str | None = None, message: str = FAILURE
) -> dict:
    """The output stage's last block (the fp32 cast) raises `RuntimeError(message)` at its
    `fail_at`-th call (0: never), as a failing kernel (or with `OUT_OF_MEMORY`, a GPU out of memory)
    would, in one run of `kind` ("generation", "loglikelihood", or "held_out" on the text file
    `source`); then the same engine runs it again without the failure. Returns what this rank
    raised (type, message), how long the failing run took, and the answers of both runs (the first:
    None when it raised)."""
    from lighteval_nanotron.parallel.deadline import bounded_collectives

    context, model, engine = _engine(checkpoint, tp, pp)
    cast = model.model.cast_to_fp32  # the chain's last block: on the output stage, a plain function
    built = getattr(cast, "pp_block", None)
    calls = [0]

    def cast_running_out_of_memory(*args, **kwargs):
        calls[0] += 1
        if calls[0] == fail_at:
            raise RuntimeError(message)
        return built(*args, **kwargs)

    if built is not None:
        cast.pp_block = cast_running_out_of_memory
    with bounded_collectives(context, timeout_s=30):
        start = time.perf_counter()
        first = None
        try:
            first = _answers(engine, kind, source)
            raised = None
        except Exception as error:  # noqa: BLE001 - what each rank raised is the result
            raised = (type(error).__name__, str(error))
        seconds = time.perf_counter() - start
        if built is not None:
            cast.pp_block = built
        return {"raised": raised, "seconds": seconds, "first": first, "again": _answers(engine, kind, source)}


def overflowing_logits(checkpoint: str, tp: int, pp: int) -> dict:
    """The final norm's weights set to inf after loading (logits that overflow, as a diverged bf16
    run's can): what every request kind returns."""
    import torch

    _, model, engine = _engine(checkpoint, tp, pp)
    norm = getattr(model.model.final_layer_norm, "pp_block", None)
    if norm is not None:
        with torch.no_grad():
            norm.weight.fill_(float("inf"))
    docs = engine_docs()
    return {
        "generation": engine.greedy_until(docs),
        "loglikelihood": engine.loglikelihood(docs),
        "rolling": engine.loglikelihood_rolling(docs),
    }
