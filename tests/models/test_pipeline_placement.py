"""The engine at every block placement Nanotron gives a small model: the same answers as TP1.

Nanotron places its pipeline blocks by compute cost (a decoder layer ~ its matmuls, lm_head ~
vocab x hidden, the embedding, final norm and fp32 cast 0), so with few layers or a large
vocabulary the final norm and lm_head sit on an earlier stage than the last (the last stage
holding only the fp32 cast), a stage holds no decoder layer, or a rank holds no block at all.
Each case below asserts the placement it exercises, then compares scoring (log-likelihood,
rolling), greedy and sampled generation and the held-out loss with the engine on one process, on
the same weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config
from lighteval_nanotron.models.families.starcoder2.tiny import tiny_starcoder2_config
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_main import requires_qwen2
from tests.helpers.tiny_model import make_tiny_checkpoint, tiny_tokenizer
from tests.models.engine_cases import assert_same, run_engine
from tests.models.held_out_cases import held_out_run, write_text_jsonl

MODELS = {  # tiny Llama (hidden 64, 4 heads, 2 KV heads) and Starcoder2 configs
    "two_layers": lambda: tiny_llama_config(num_hidden_layers=2, intermediate_size=32),
    "three_layers": lambda: tiny_llama_config(num_hidden_layers=3),
    "padded_vocab": lambda: tiny_llama_config(num_hidden_layers=3, vocab_size=4096),  # ids past the tokenizer's
    "starcoder2_two_layers": lambda: tiny_starcoder2_config(num_hidden_layers=2),
}

CASES = [  # (model, tp, pp, Nanotron's placement {pp rank: blocks})
    ("two_layers", 1, 2, {0: ["emb", "L0", "L1", "norm", "head"], 1: ["cast"]}),
    ("two_layers", 2, 2, {0: ["emb", "L0", "L1", "norm", "head"], 1: ["cast"]}),
    ("three_layers", 1, 2, {0: ["emb", "L0", "L1", "L2"], 1: ["norm", "head", "cast"]}),
    ("three_layers", 1, 3, {0: ["emb", "L0", "L1"], 1: ["L2", "norm", "head"], 2: ["cast"]}),
    ("padded_vocab", 1, 3, {0: ["emb", "L0", "L1", "L2", "norm", "head"], 1: ["cast"]}),  # PP rank 2: no block
    ("starcoder2_two_layers", 1, 2, {0: ["emb", "dropout", "L0", "L1", "norm", "head"], 1: ["cast"]}),
]
SAMPLING = {"temperature": 1.0, "top_k": 40, "num_samples": 2, "seed": 5}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.getbasetemp()
    return {name: make_tiny_checkpoint(base / f"placement_{name}", config()) for name, config in MODELS.items()}


@pytest.fixture(scope="module")
def tp1(checkpoints) -> dict[str, dict]:
    return {name: run_engine(path, 1, 1, 1)[0] for name, path in checkpoints.items()}


def _case_id(case) -> str:
    model, tp, pp, _ = case
    return f"{model}-tp{tp}-pp{pp}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_every_placement_matches_tp1(checkpoints, tp1, case):
    model, tp, pp, placement = case
    results = run_engine(checkpoints[model], tp, pp, 1)
    assert results[0]["placement"] == placement
    for rank_result in results:  # gather_to="all": every rank, a rank without a block too
        assert_same(rank_result, tp1[model])
        assert not any(r.non_finite_logits for r in rank_result["generation"])


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("two_layers", "padded_vocab")], ids=_case_id)
def test_held_out_loss_at_every_placement_matches_tp1(checkpoints, tmp_path, case):
    model, tp, pp, _ = case
    source = str(write_text_jsonl(tmp_path / "web.jsonl"))
    args = (str(checkpoints[model]), source)
    settings = (32, 8 * 32, {"tokens_per_batch": 64})  # sequence length, tokens, 4 micro-batches
    one = run_distributed(held_out_run, 1, *args, 1, 1, 1, *settings, timeout=60)[0]
    for result in run_distributed(held_out_run, tp * pp, *args, tp, pp, 1, *settings, timeout=60):
        assert result["nll"] == pytest.approx(one["nll"], rel=1e-5)


@pytest.mark.parametrize("switch", ["logits_at_targets", "kv_cache", "pipeline_overlap"])
def test_norm_before_the_last_stage_with_a_switch_off(checkpoints, tp1, switch):
    results = run_engine(checkpoints["two_layers"], 1, 2, 1, **{switch: False}, max_rows_per_batch=3)
    assert_same(results[-1], tp1["two_layers"])


def test_sampled_generation_with_the_norm_before_the_last_stage(checkpoints):
    one = run_engine(checkpoints["two_layers"], 1, 1, 1, generation=SAMPLING)[0]["generation"]
    assert any(len({tuple(t) for t in r.output_tokens}) > 1 for r in one)  # really sampled
    for rank_result in run_engine(checkpoints["two_layers"], 1, 2, 1, generation=SAMPLING):
        assert [r.output_tokens for r in rank_result["generation"]] == [r.output_tokens for r in one]


@pytest.mark.parametrize("tp", [1, 2], ids=["pp2", "tp2-pp2"])
def test_bf16_with_the_norm_before_the_last_stage_equals_one_stage(checkpoints, tp):
    """Pipeline stages change no reduction (only which rows share a matmul), so in bf16 too the
    answers equal the same TP size on one stage."""
    bf16 = {"dtype": "bfloat16"}
    one_stage = run_engine(checkpoints["two_layers"], tp, 1, 1, model=bf16)[0]
    results = run_engine(checkpoints["two_layers"], tp, 2, 1, model=bf16)
    assert results[0]["param_dtypes"] == ["torch.bfloat16"]  # the last stage has only the fp32 cast
    for rank_result in results:
        assert_same(rank_result, one_stage)


@requires_qwen2
def test_qwen2_with_a_rank_without_a_block_matches_tp1(tmp_path):
    """Current Nanotron's Qwen2 places its blocks by the same costs but has no fp32 cast block, so
    its final norm always sits with `lm_head` on the last stage that has blocks; at PP2 this model
    is all on stage 0 and PP rank 1 holds nothing."""
    from lighteval_nanotron.convert import convert_hf_to_nanotron
    from lighteval_nanotron.models.families.qwen2.tiny import tiny_hf_qwen2

    tiny_hf_qwen2(intermediate_size=32).save_pretrained(tmp_path / "hf")
    tiny_tokenizer().save_pretrained(tmp_path / "hf")
    convert_hf_to_nanotron(tmp_path / "hf", tmp_path / "nanotron")
    one = run_engine(tmp_path / "nanotron", 1, 1, 1)[0]
    results = run_engine(tmp_path / "nanotron", 1, 2, 1)
    assert results[0]["placement"] == {0: ["emb", "L0", "L1", "norm", "head"]}
    for rank_result in results:
        assert_same(rank_result, one)
