"""Current Nanotron's Qwen2 (dense and MoE) through the engine, from tiny random Hugging Face models
converted with `lighteval-nanotron convert`: PP2 and TP2 give the TP1/PP1 answers (all three request
kinds), Nanotron's own forward (every switch off) gives the same log-probs as the engine's tree
attention, and every (doc, choice) log-prob is transformers' within 1e-4 (fp32). Needs GitHub main."""

from __future__ import annotations

import pytest

from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from lighteval_nanotron.convert import convert_hf_to_nanotron
from lighteval_nanotron.models.engine import EngineConfig
from lighteval_nanotron.models.families.qwen2.tiny import tiny_hf_qwen2, tiny_hf_qwen2_moe
from tests.checkpoint_eval.tiny_hf import transformers_logprob
from tests.helpers.nanotron_main import requires_qwen2
from tests.helpers.tiny_model import tiny_tokenizer
from tests.models.engine_cases import assert_same, run_engine

pytestmark = requires_qwen2
TOLERANCE = 1e-4
ALL_OFF = {switch: False for switch in EngineConfig.SWITCHES}
BUILDERS = {"dense": lambda: tiny_hf_qwen2(tie=False), "moe": tiny_hf_qwen2_moe}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def converted(request, tmp_path_factory):
    """(name, HF model, converted checkpoint, TP1/PP1 engine results)."""
    folder = tmp_path_factory.mktemp(f"qwen2_{request.param}")
    model = BUILDERS[request.param]()
    model.save_pretrained(folder / "hf")
    tiny_tokenizer().save_pretrained(folder / "hf")
    convert_hf_to_nanotron(folder / "hf", folder / "nanotron")
    checkpoint = folder / "nanotron"
    assert read_checkpoint_model(checkpoint).family.name == "qwen2"
    return request.param, model, checkpoint, run_engine(checkpoint, 1, 1, 1)[0]


def test_engine_matches_transformers(converted):
    """Every choice of every doc that fits the context (the long doc is cut from the left)."""
    name, model, _, baseline = converted
    whole = [response for response in baseline["loglikelihood"] if not response.truncated_tokens_count]
    assert len(whole) >= 4
    worst = 0.0
    for response in whole:
        for continuation, logprob in zip(response.output_tokens, response.logprobs, strict=True):
            worst = max(worst, abs(transformers_logprob(model, response.input_tokens, continuation) - logprob))
    assert worst < TOLERANCE, f"{name}: {worst}"


@pytest.mark.parametrize("layout", [(1, 2, 1), (2, 1, 1)], ids=["pp2", "tp2"])
def test_layout_matches_tp1_pp1(converted, layout):
    _, _, checkpoint, baseline = converted
    for rank_result in run_engine(checkpoint, *layout):
        assert_same(rank_result, baseline)


def test_nanotron_forward_with_every_switch_off_matches(converted):
    """Switches off: decoder layers run Nanotron main's own forward (flash varlen attention on
    `[batch * seq, hidden]`), generation recomputes without the KV cache."""
    _, _, checkpoint, baseline = converted
    assert_same(run_engine(checkpoint, 1, 2, 1, **ALL_OFF)[-1], baseline)
