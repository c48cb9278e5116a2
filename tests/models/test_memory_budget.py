"""Micro-batches sized by the memory every rank agrees on, and a run that runs out of memory retried
with smaller micro-batches: the same results as the default plan, on the tiny Llama."""

from __future__ import annotations

import logging

import pytest

from tests.helpers.distributed import run_distributed
from tests.models.engine_cases import MAX_LENGTH, assert_same, engine_docs


def _engine(checkpoint: str, tp: int, pp: int, dp: int, **config):
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    return NanotronLightevalModel(
        model, context, tiny_tokenizer(), EngineConfig(max_length=MAX_LENGTH, gather_to="all", **config)
    )


def _budgets_per_rank(checkpoint: str, tp: int, pp: int, dp: int, tokens_by_rank: list[int]) -> dict:
    """Rank function: each rank's `memory_budget_gb` holds a different number of tokens (as ranks
    with different free memory would); every request kind runs; the budget each plan was cut for."""
    import torch.distributed as dist

    from lighteval_nanotron.models.engine.memory import GIB

    engine = _engine(checkpoint, tp, pp, dp)
    engine.config.memory_budget_gb = (tokens_by_rank[dist.get_rank()] + 0.5) * engine.runtime.token_bytes / GIB
    docs = engine_docs()
    plans = {
        "loglikelihood": engine.prepare_loglikelihood(docs, unconditioned=True),
        "rolling": engine.prepare_rolling(docs),
        "generation": engine.prepare_generation(docs),
    }
    results = {kind: engine.run(plan) for kind, plan in plans.items()}
    return {**results, "budgets": {kind: plan.config.tokens_per_batch for kind, plan in plans.items()}}


@pytest.mark.parametrize("layout", [(2, 1, 1), (1, 1, 2)], ids=["tp2", "dp2"])
def test_ranks_agree_on_the_smallest_memory_budget(tiny_checkpoint, baseline, layout):
    tokens_by_rank = [300, 200]  # rank 1 has the least memory: every rank cuts batches for it
    results = run_distributed(_budgets_per_rank, 2, str(tiny_checkpoint), *layout, tokens_by_rank, timeout=240)
    for result in results:
        assert result["budgets"] == {"loglikelihood": 200, "rolling": 200, "generation": 200}
        assert_same(result, baseline)


def _refused(checkpoint: str) -> tuple[str, int, int | None]:
    """Rank function: a memory budget smaller than the longest row of the docs."""
    from lighteval_nanotron.errors import EvaluationOutOfMemory
    from lighteval_nanotron.models.engine.memory import GIB

    engine = _engine(checkpoint, 1, 1, 1)
    engine.config.memory_budget_gb = 4 * engine.runtime.token_bytes / GIB
    try:
        engine.loglikelihood(engine_docs())
    except EvaluationOutOfMemory as error:
        return str(error), error.needed_bytes, error.free_bytes
    raise AssertionError("a row over memory_budget_gb was evaluated")


def test_a_row_over_the_memory_budget_is_refused_in_one_line(tiny_checkpoint):
    ((message, needed, free),) = run_distributed(_refused, 1, str(tiny_checkpoint), timeout=120)
    assert message.startswith("out of memory: loglikelihood of one row of ")
    assert "over memory_budget_gb" in message and "\n" not in message
    assert needed > 0 and free is not None


def _under_address_space_limit(checkpoint: str, headroom: int) -> dict:
    """Rank function: many docs scored in one huge micro-batch (`tokens_per_batch` 10**8, rows unbounded) with the
    address space limited to what the process maps plus `headroom` bytes: the first allocation
    that passes the limit fails (the CPU allocator's error), and the engine retries with smaller
    micro-batches; then the same plan again (its smaller batches kept). Against the default plan
    without the limit."""
    import resource

    from lighteval_nanotron.requests import Doc

    words = " ".join(f"w{k}" for k in range(30))
    docs = [
        Doc(query=f"{k} {words} {k}", choices=[f" a{k} b", f" c{k}", f" d e{k} f", " g"], gold_index=0)
        for k in range(3000)
    ]
    reference = _engine(checkpoint, 1, 1, 1).loglikelihood(docs)
    engine = _engine(checkpoint, 1, 1, 1, tokens_per_batch=10**8, max_rows_per_batch=10**4)
    plan = engine.prepare_loglikelihood(docs)
    planned = max(batch.input_ids.numel() for batch in plan.batches)
    with open("/proc/self/status") as status:
        mapped = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + headroom, hard))
    retries: list[int] = []  # the micro-batch tokens of each retry of the second run
    handler = logging.Handler()
    handler.emit = lambda record: retries.append(int(record.args[-1]))
    try:
        first = engine.run(plan)
        cut = plan.config.tokens_per_batch
        logging.getLogger("lighteval_nanotron.models.engine.model").addHandler(handler)
        second = engine.run(plan)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        logging.getLogger("lighteval_nanotron.models.engine.model").removeHandler(handler)
    return {"reference": reference, "first": first, "second": second, "planned": planned, "cut": cut,
            "after": plan.config.tokens_per_batch, "retries": retries}  # fmt: skip


def test_an_evaluation_over_an_address_space_limit_retries_with_smaller_batches(tiny_checkpoint):
    (result,) = run_distributed(_under_address_space_limit, 1, str(tiny_checkpoint), 100 * 2**20, timeout=300)
    assert result["cut"] < result["planned"]  # the limit was hit: the plan was cut again
    # the second run starts from the cut plan, never the planned size (it is cut again only where the
    # address space left after the first run is smaller still)
    assert result["after"] <= result["cut"] and all(tokens < result["cut"] for tokens in result["retries"])
    for run in ("first", "second"):
        for got, want in zip(result[run], result["reference"], strict=True):
            assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4, rel=1e-6)
            assert got.argmax_logits_eq_gold == want.argmax_logits_eq_gold
