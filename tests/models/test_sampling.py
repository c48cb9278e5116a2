"""Seeded sampling: the same samples at every layout and batching, different seeds differ, the
limits that must equal greedy do, and several samples without a temperature are refused."""

from __future__ import annotations

import pytest
import torch

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.engine.sampling import sample_token, warped
from lighteval_nanotron.requests import GenerationParameters
from tests.models.sampling_cases import run_generate

SAMPLING = {"temperature": 1.0, "top_k": 40, "top_p": 0.95, "num_samples": 3, "seed": 7}


@pytest.fixture(scope="module")
def sampled_tp1(tiny_checkpoint):
    return run_generate(tiny_checkpoint, 1, 1, 1, SAMPLING)[0]


def test_samples_are_identical_at_pp2_dp2_tp2_and_any_batching(tiny_checkpoint, sampled_tp1):
    assert all(len(tokens) == 3 for tokens in sampled_tp1["tokens"])
    for layout, config in (((1, 2, 1), {}), ((1, 1, 2), {}), ((2, 1, 1), {"max_rows_per_batch": 1})):
        for rank_result in run_generate(tiny_checkpoint, *layout, SAMPLING, **config):
            assert rank_result["tokens"] == sampled_tp1["tokens"], layout
            assert rank_result["texts"] == sampled_tp1["texts"]


def test_samples_differ_between_seeds_and_between_samples(tiny_checkpoint, sampled_tp1):
    other = run_generate(tiny_checkpoint, 1, 1, 1, {**SAMPLING, "seed": 8})[0]
    assert other["tokens"] != sampled_tp1["tokens"]
    distinct = [len({tuple(t) for t in tokens}) for tokens in sampled_tp1["tokens"]]
    assert max(distinct) > 1


def test_top_k_1_equals_greedy(tiny_checkpoint, baseline):
    greedy = [r.output_tokens[0] for r in baseline["generation"]]
    sampled = run_generate(tiny_checkpoint, 1, 1, 1, {"temperature": 0.8, "top_k": 1, "num_samples": 2})[0]
    assert [tokens[0] for tokens in sampled["tokens"]] == greedy
    assert [tokens[1] for tokens in sampled["tokens"]] == greedy


def test_a_tiny_temperature_draws_the_argmax():
    logits = torch.randn(20, 500, generator=torch.Generator().manual_seed(0))
    params = GenerationParameters(temperature=1e-4)
    assert [sample_token(row, params, seed) for seed, row in enumerate(logits)] == logits.argmax(-1).tolist()


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    kept = torch.isfinite(warped(probs.log(), GenerationParameters(temperature=1.0, top_p=0.8)))
    assert kept.tolist() == [True, True, False, False]
    kept = torch.isfinite(warped(probs.log(), GenerationParameters(temperature=1.0, top_p=0.81)))
    assert kept.tolist() == [True, True, True, False]
    kept = torch.isfinite(warped(probs.log(), GenerationParameters(temperature=1.0, top_p=0.1)))
    assert kept.tolist() == [True, False, False, False]


def test_draws_follow_the_distribution():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    params = GenerationParameters(temperature=1.0)
    counts = torch.bincount(torch.tensor([sample_token(logits, params, seed) for seed in range(4000)]), minlength=4)
    assert torch.allclose(counts / 4000, logits.softmax(-1), atol=0.03)


def test_several_samples_without_temperature_are_refused(tiny_checkpoint):
    from tests.helpers.distributed import DistributedRunError

    with pytest.raises(DistributedRunError, match="temperature > 0"):
        run_generate(tiny_checkpoint, 1, 1, 1, {"num_samples": 2})


@pytest.mark.parametrize(
    "values, message",
    [({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"), ({"tmperature": 1}, "unknown generation")],
)
def test_bad_generation_parameters_name_the_field(values, message):
    with pytest.raises(ConfigError, match=message):
        GenerationParameters.from_dict(values)


def test_a_task_setting_overrides_the_run_setting_field_by_field():
    from lighteval_nanotron.models.engine import EngineConfig
    from lighteval_nanotron.models.engine.generation_plan import make_request, sample_rows
    from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter
    from lighteval_nanotron.requests import Doc
    from tests.helpers.tiny_model import tiny_tokenizer

    tok = TokenizerAdapter(tiny_tokenizer())
    config = EngineConfig(generation={"temperature": 0.5, "top_k": 10, "seed": 3})
    own = GenerationParameters(temperature=0.9, num_samples=4)
    doc = Doc(query="q", choices=["a"], gold_index=0, task_name="t", id="1", generation_parameters=own)
    request = make_request(0, doc, "q", tok, config, 32)
    assert request.sampling == GenerationParameters(temperature=0.9, top_k=10, num_samples=4, seed=3)
    rows = sample_rows(request)
    assert [r.sample_index for r in rows] == [0, 1, 2, 3] and len({r.seed_stream for r in rows}) == 4
    greedy = make_request(0, Doc(query="q", choices=["a"], gold_index=0), "q", tok, EngineConfig(), 32)
    assert greedy.sampling is None and sample_rows(greedy) == [greedy]


@pytest.mark.parametrize("run, task", [({"top_k": 5}, None), ({}, {"top_p": 0.9}), ({"top_k": 0, "top_p": 0.5}, None)])
def test_sampling_settings_without_a_temperature_are_refused(run, task):
    """Greedy decoding ignores top_k and top_p: accepted, the results would record settings that did
    nothing (and two identical greedy runs would differ in the step's settings)."""
    from lighteval_nanotron.models.engine import EngineConfig
    from lighteval_nanotron.models.engine.generation_plan import make_request
    from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter
    from lighteval_nanotron.requests import Doc
    from tests.helpers.tiny_model import tiny_tokenizer

    own = None if task is None else GenerationParameters(**task)
    doc = Doc(query="q", choices=["a"], gold_index=0, task_name="t", id="1", generation_parameters=own)
    with pytest.raises(ConfigError, match=r"task t: top_\w=[0-9.]+ .*greedy"):
        make_request(0, doc, "q", TokenizerAdapter(tiny_tokenizer()), EngineConfig(generation=run), 32)
    off = EngineConfig(generation={"top_k": 0, "top_p": 1.0})  # their "off" values are fine
    assert make_request(0, Doc(query="q", choices=["a"], gold_index=0), "q", TokenizerAdapter(tiny_tokenizer()),
                        off, 32).sampling is None  # fmt: skip


def test_task_config_and_run_configs_take_generation_parameters(tmp_path):
    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig
    from lighteval_nanotron.options.hook import EvaluationConfig

    with pytest.raises(ConfigError, match="lighteval_nanotron.generation: .*top_k"):
        EvaluationConfig(tasks="lighteval|gsm8k|0", generation={"top_k": -2})
    with pytest.raises(ConfigError, match="unknown generation parameter"):
        CheckpointEvalConfig(tasks="x", checkpoint=str(tmp_path), generation={"min_p": 0.1})
    assert EvaluationConfig(tasks="lighteval|gsm8k|0", generation={"temperature": 0.7}).generation == {
        "temperature": 0.7
    }
