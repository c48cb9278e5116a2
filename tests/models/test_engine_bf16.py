"""The engine on a bf16 model (TP1, and TP2 sequence-parallel with async communication): log-probs
computed in fp32 from bf16 activations, close to the fp32 model's; greedy flags unchanged.

Measured on the tiny random model: largest relative log-prob difference 1.03e-2 (bf16 vs fp32
and bf16 TP2 vs bf16 TP1), no greedy flag differs; greedy generations may (2 of 8 docs do)."""

from __future__ import annotations

import math

import pytest

from tests.models.engine_cases import assert_same, engine_docs, run_engine

BF16_RELATIVE = 3e-2  # bf16 keeps 8 mantissa bits (~0.4% per rounding), through 2 layers and a sum


@pytest.fixture(scope="module")
def bf16_runs(tiny_checkpoint) -> tuple[dict, list[dict]]:
    tp1 = run_engine(tiny_checkpoint, 1, 1, 1, model={"dtype": "bfloat16"})[0]
    sequence_parallel = {"dtype": "bfloat16", "tp_mode": "REDUCE_SCATTER", "async": True}
    return tp1, run_engine(tiny_checkpoint, 2, 1, 1, model=sequence_parallel)


def test_bf16_model_scores_close_to_fp32(bf16_runs, baseline):
    tp1, _ = bf16_runs
    assert tp1["param_dtypes"] == ["torch.bfloat16"]
    values = [v for r in tp1["loglikelihood"] + tp1["rolling"] for v in r.logprobs]
    assert all(math.isfinite(v) and v < 0 for v in values)
    assert_same(tp1, baseline, tolerance=0.0, relative=BF16_RELATIVE, generations=False)
    assert tp1["loglikelihood"] != baseline["loglikelihood"]  # really computed in bf16


def test_bf16_sequence_parallel_tp2_matches_bf16_tp1(bf16_runs):
    tp1, tp2 = bf16_runs
    for rank_result in tp2:
        assert rank_result["param_dtypes"] == ["torch.bfloat16"] and rank_result["tp_state_restored"]
        assert_same(rank_result, tp1, tolerance=0.0, relative=BF16_RELATIVE, generations=False)
        assert rank_result["generation_stats"].recomputed_steps == 0
        for response, doc in zip(rank_result["generation"], engine_docs(), strict=True):
            assert len(response.output_tokens[0]) <= doc.generation_size
