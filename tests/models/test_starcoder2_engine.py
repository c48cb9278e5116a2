"""Starcoder2 through the engine: every layout (TP2, PP2, TP2xPP2, DP2) gives the TP1/PP1 answers,
and TP1/PP1 equals Nanotron's own Starcoder2 forward, for grouped-query and multi-query attention."""

from __future__ import annotations

import pytest
import torch

from lighteval_nanotron.models.families.starcoder2.tiny import tiny_starcoder2_config
from tests.helpers.distributed import LAYOUTS, run_distributed
from tests.helpers.tiny_model import make_tiny_checkpoint
from tests.models.engine_cases import MAX_LENGTH, engine_docs, evaluate
from tests.models.test_engine_layouts import TOLERANCE, assert_same


def _run(checkpoint, tp: int, pp: int, dp: int) -> list[dict]:
    return run_distributed(evaluate, tp * pp * dp, str(checkpoint), tp, pp, dp, {}, timeout=180)


def _engine_and_nanotron_forward(checkpoint: str) -> list[tuple[list[float], list[float]]]:
    """Rank function (TP1/PP1): each doc's choice log-probs from the engine and from Nanotron's forward."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter, encode_pair, score_window
    from lighteval_nanotron.tasks.prompt_manager import PromptManager
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(1, 1, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig(max_length=MAX_LENGTH))
    tok, prompt = TokenizerAdapter(tiny_tokenizer()), PromptManager().prepare_prompt
    pairs = []
    for doc, response in zip(engine_docs(), engine.loglikelihood(engine_docs()), strict=True):
        model.eval()
        forward = []
        for choice in doc.choices:
            window, _ = score_window(*encode_pair(tok, prompt(doc), choice, True, False), MAX_LENGTH)
            ids = torch.tensor([window.input_ids])
            with torch.no_grad():
                mask = torch.ones_like(ids, dtype=torch.bool)
                logprobs = model.model(input_ids=ids, input_mask=mask)[:, 0].double().log_softmax(-1)
            positions = range(window.start, window.start + len(window.targets))
            forward.append(sum(logprobs[p, t].item() for p, t in zip(positions, window.targets)))
        pairs.append((response.logprobs, forward))
    return pairs


@pytest.fixture(scope="module")
def starcoder2_baseline(tiny_starcoder2_checkpoint) -> dict:
    return _run(tiny_starcoder2_checkpoint, 1, 1, 1)[0]


@pytest.fixture(scope="module")
def multi_query_checkpoint(tmp_path_factory):
    config = tiny_starcoder2_config(multi_query=True, grouped_query=False, num_kv_heads=None)
    return make_tiny_checkpoint(tmp_path_factory.getbasetemp() / "tiny_starcoder2_mqa_checkpoint", config)


@pytest.mark.parametrize("layout", LAYOUTS[1:], ids=lambda layout: "tp{}-pp{}-dp{}".format(*layout))
def test_starcoder2_layout_matches_tp1_pp1(tiny_starcoder2_checkpoint, starcoder2_baseline, layout):
    for rank_result in _run(tiny_starcoder2_checkpoint, *layout):
        assert_same(rank_result, starcoder2_baseline)


def test_multi_query_starcoder2_tp2_pp2_matches_tp1_pp1(multi_query_checkpoint):
    baseline = _run(multi_query_checkpoint, 1, 1, 1)[0]
    assert_same(_run(multi_query_checkpoint, 2, 2, 1)[-1], baseline)


@pytest.mark.parametrize("variant", ["grouped_query", "multi_query"])
def test_starcoder2_engine_equals_nanotron_forward(tiny_starcoder2_checkpoint, multi_query_checkpoint, variant):
    checkpoint = tiny_starcoder2_checkpoint if variant == "grouped_query" else multi_query_checkpoint
    for engine, forward in run_distributed(_engine_and_nanotron_forward, 1, str(checkpoint), timeout=120)[0]:
        assert engine == pytest.approx(forward, abs=TOLERANCE)
