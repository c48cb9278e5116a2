"""Gold-answer metrics asked for by name in a task spec: no extra model call on a multiple-choice
task, one log-likelihood request per doc on a generative one, values from the model's own scores."""

import math
import types

import pytest
from helpers_pipeline import GEN_ROWS, MC_ROWS, BigramLM, _config, gen_prompt, mc_prompt

from lighteval_nanotron.errors import ConfigError, TaskSpecError
from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings

TASKS = types.ModuleType("gold_metric_tasks")
TASKS.TASKS_TABLE = [
    _config("mc", "mc", mc_prompt, [Metrics.loglikelihood_acc]),
    _config("gen", "gen", gen_prompt, [Metrics.exact_match], generation_size=12, stop_sequence=["\n"]),
]
GOLD = "@extra_metrics=gold_bpb+normalized_mc_prob+gold_margin"


def _run(model, specs):
    pipeline = EvaluationPipeline.prepare(model, specs, PipelineSettings(custom_tasks=TASKS))
    model.calls.clear()
    return pipeline.run(step=1)


def test_multiple_choice_gold_metrics_cost_no_model_call(toy_data):
    plain, gold = BigramLM(), BigramLM()
    without = _run(plain, "custom|mc|0")
    with_gold = _run(gold, f"custom|mc{GOLD}|0")
    assert plain.calls == gold.calls == ["loglikelihood"]
    assert with_gold.results["custom|mc|0"]["acc"] == without.results["custom|mc|0"]["acc"]
    expected_bpb, expected_prob, expected_margin = [], [], []
    for row in MC_ROWS:
        context = gold.tokenizer.encode(row["question"])
        scores = [gold.score(context, gold.tokenizer.encode(choice))[0] for choice in row["choices"]]
        g = row["gold"]
        expected_bpb.append(-scores[g] / (math.log(2) * len(row["choices"][g].encode())))
        expected_prob.append(math.exp(scores[g]) / sum(math.exp(s) for s in scores))
        expected_margin.append(scores[g] - scores[1 - g])
    scores = with_gold.results["custom|mc|0"]
    assert scores["gold_bpb"] == pytest.approx(sum(expected_bpb) / 4)
    assert scores["normalized_mc_prob"] == pytest.approx(sum(expected_prob) / 4)
    assert scores["gold_margin"] == pytest.approx(sum(expected_margin) / 4)
    for name in ("gold_bpb", "normalized_mc_prob", "gold_margin"):
        mean = scores[name]
        per_doc = {"gold_bpb": expected_bpb, "normalized_mc_prob": expected_prob, "gold_margin": expected_margin}[name]
        sem = math.sqrt(sum((v - mean) ** 2 for v in per_doc) / 3) / 2
        assert scores[name + "_stderr"] == pytest.approx(sem)
    info = with_gold.config_tasks["custom|mc|0"]
    assert info["higher_is_better"]["gold_bpb"] is False and info["chance"]["normalized_mc_prob"] == 0.5


def test_generative_gold_bpb_is_one_loglikelihood_request_per_doc(toy_data):
    plain, gold = BigramLM(), BigramLM()
    _run(plain, "custom|gen|0")
    result = _run(gold, "custom|gen@extra_metrics=gold_bpb|0")
    assert plain.calls == ["greedy_until"]
    assert gold.calls == ["loglikelihood", "greedy_until"]
    rows = [dict(row) for row in GEN_ROWS]
    expected = [
        -gold.score(gold.tokenizer.encode(row["question"]), gold.tokenizer.encode(row["answer"]))[0]
        / (math.log(2) * len(row["answer"].encode()))
        for row in rows
    ]
    assert result.results["custom|gen|0"]["gold_bpb"] == pytest.approx(sum(expected) / len(expected))
    methods = [detail.sampling_method for detail in result.details["custom|gen|0"]]
    assert methods.count("LOGPROBS") == methods.count("GENERATIVE") == len(rows)


def test_gold_metrics_that_need_a_wrong_choice_are_refused_on_a_generative_task(toy_data):
    with pytest.raises(ConfigError, match="normalized_mc_prob .*wrong choice"):
        EvaluationPipeline.prepare(
            BigramLM(), "custom|gen@extra_metrics=normalized_mc_prob|0", PipelineSettings(custom_tasks=TASKS)
        )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("custom|mc@extra_metrics=gold_bpp|0", "unknown metric 'gold_bpp'"),
        ("custom|mc@extra_metrics=loglikelihood_acc|0", "result key 'acc'"),
        ("custom|mc@extra_metrics=gold_bpb+gold_bpb|0", "result key 'gold_bpb'"),
    ],
)
def test_bad_extra_metrics_are_refused_when_the_spec_is_read(toy_data, spec, message):
    with pytest.raises(TaskSpecError, match=message):
        EvaluationPipeline.prepare(BigramLM(), spec, PipelineSettings(custom_tasks=TASKS))
