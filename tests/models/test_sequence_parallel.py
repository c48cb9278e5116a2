"""A model trained with `tp_mode: REDUCE_SCATTER` (sequence-parallel TP, with or without async
communication) is evaluated as fast as under ALL_REDUCE, with the same results: logits only at
the positions read, a KV cache for generation, the model's own TP mode left in place."""

from __future__ import annotations

import pytest

from tests.models.engine_cases import assert_same, run_engine

LAYOUTS = {
    "tp2-sync": ((2, 1, 1), False),
    "tp2-async": ((2, 1, 1), True),
    "tp2xpp2-async": ((2, 2, 1), True),
}


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def reduce_scatter(request, tiny_checkpoint) -> tuple[list[dict], tuple[int, int, int]]:
    layout, async_communication = LAYOUTS[request.param]
    model = {"tp_mode": "REDUCE_SCATTER", "async": async_communication}
    return run_engine(tiny_checkpoint, *layout, model=model), layout


def test_same_results_as_all_reduce(reduce_scatter, baseline):
    results, _ = reduce_scatter
    assert all(r["tp_modes"] == ["REDUCE_SCATTER"] for r in results)  # the model really is sequence-parallel
    for rank_result in results:
        assert_same(rank_result, baseline)


def test_generation_uses_the_kv_cache_and_logits_only_where_read(reduce_scatter):
    results, (tp, pp, _) = reduce_scatter
    output_stage = [r for r in results if r["lm_head_positions"] is not None]
    assert len(output_stage) == tp  # the TP ranks of the last pipeline stage
    for rank_result in results:
        generation = rank_result["generation_stats"]
        assert generation.recomputed_steps == 0
        assert generation.processed_tokens - generation.padding_tokens == generation.useful_tokens  # fed once
    for rank_result in output_stage:
        counted = rank_result["lm_head_positions"]
        assert counted["loglikelihood"] == rank_result["plan_stats"].logit_positions
        assert counted["loglikelihood"] < rank_result["plan_stats"].processed_tokens
        assert counted["generation"] == rank_result["generation_stats"].logit_positions
        assert counted["generation"] < rank_result["generation_stats"].processed_tokens


def test_the_models_tp_mode_is_restored(reduce_scatter):
    results, _ = reduce_scatter
    assert all(r["tp_state_restored"] for r in results)


def test_without_the_kv_cache_the_counter_shows_recompute(tiny_checkpoint):
    results = run_engine(tiny_checkpoint, 2, 1, 1, model={"tp_mode": "REDUCE_SCATTER"}, kv_cache=False)
    assert results[0]["generation_stats"].recomputed_steps > 0
