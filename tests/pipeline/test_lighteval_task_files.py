"""A task file written for lighteval runs unchanged: adapted at registry time, same results as ours."""

import dataclasses
import math
import random
import sys
import types

import helpers_pipeline
import pytest
from helpers_pipeline import BigramLM

from lighteval_nanotron.errors import ConfigError, CustomTasksError
from lighteval_nanotron.metrics import LogProbCharNorm, Metrics, aggregate_task_metrics
from lighteval_nanotron.pipeline import EvaluationPipeline
from lighteval_nanotron.requests import ModelResponse
from lighteval_nanotron.tasks import Doc, Registry

MC, GEN, PPL = "custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0"
LIGHTEVAL_ONLY = "custom|toy_gen_lighteval_metrics|0"


def _lighteval():
    return pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")


def _results(custom_tasks, tasks: str) -> dict:
    return EvaluationPipeline.prepare(BigramLM(), tasks, custom_tasks=custom_tasks).run(step=1).results


def _our_twin() -> types.ModuleType:
    """`lighteval_toy_tasks` written against this project: helpers_pipeline's tasks, the same metrics."""
    char_norm = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbCharNorm()})
    table = {config.name: config for config in helpers_pipeline.TASKS_TABLE}
    module = types.ModuleType("our_toy_tasks")
    module.TASKS_TABLE = [
        dataclasses.replace(table["toy_mc"], metrics=[Metrics.loglikelihood_acc, char_norm]),
        table["toy_gen"],
        table["toy_ppl"],
    ]
    return module


def test_lighteval_task_file_gives_the_same_results_as_ours(toy_data):
    _lighteval()
    import lighteval_toy_tasks

    ours = _results(_our_twin(), ",".join([MC, GEN, PPL]))
    theirs = _results(lighteval_toy_tasks, ",".join([MC, GEN, PPL]))
    assert theirs[MC]["acc"] == ours[MC]["acc"] == 0.75
    assert theirs[GEN]["em"] == ours[GEN]["em"]
    assert theirs[GEN]["acc"] == ours[GEN]["acc"]
    for key in ("word_perplexity", "bits_per_byte", "word_perplexity_stderr", "bits_per_byte_stderr"):
        assert theirs[PPL][key] == ours[PPL][key]
    # lighteval's result keys are kept: its acc_norm is our accuracy with per-character normalization
    assert theirs[MC]["acc_norm"] == ours[MC]["acc_with_logprob_normalization"]


def test_a_metric_we_lack_runs_through_lightevals_implementation(toy_data):
    _lighteval()
    import lighteval_toy_tasks

    results = _results(lighteval_toy_tasks, LIGHTEVAL_ONLY)[LIGHTEVAL_ONLY]
    # greedy bigram generations: "defghij" (gold defghij), "nop" (gold nop), "defghij" (gold xyz)
    assert results["perfect_em"] == pytest.approx(2 / 3)
    assert results["rouge1"] == pytest.approx(2 / 3)


def _repaired(reference):
    """lighteval 0.10's metric with its own sample function made callable.

    Some of its metrics raise when called: `recall_at_k` pass a `Recall` object (not its `compute`),
    `mrr_single_token` passes the `mrr` Metric itself. The function they name defines the value.
    """
    fn = reference.sample_level_fn
    if hasattr(fn, "sample_level_fn"):
        fn = fn.sample_level_fn
    if not callable(fn):
        fn = fn.compute
    return dataclasses.replace(reference, sample_level_fn=fn)


def _random_case(rng: random.Random, n_choices: int) -> tuple:
    choices = [" " + "".join(rng.choice("abcde") for _ in range(rng.randint(1, 6))) for _ in range(n_choices)]
    gold = rng.randrange(n_choices)
    doc = Doc(query="q" * rng.randint(1, 9), choices=choices, gold_index=gold, task_name="t")
    response = ModelResponse(
        logprobs=[-rng.uniform(0.1, 9) for _ in choices],
        argmax_logits_eq_gold=[rng.random() < 0.5 for _ in choices],
        output_tokens=[[1] * rng.randint(1, 4) for _ in choices],
        text=[rng.choice([choices[gold], choices[gold].upper() + " x", " zz"])],
    )
    return doc, response


def test_every_metric_mapped_by_name_equals_lightevals_own():
    _lighteval()
    from lighteval.metrics.metrics import Metrics as LightevalMetrics

    from lighteval_nanotron.tasks import lighteval_adapter

    rng = random.Random(0)
    cases = [_random_case(rng, rng.randint(2, 5)) for _ in range(40)]
    perplexity_cases = [
        (Doc(query=" ".join("ab" * rng.randint(1, 4) for _ in range(rng.randint(1, 5))), choices=[], gold_index=0),
         ModelResponse(logprobs=[-rng.uniform(1, 30)], output_tokens=[[1, 2, 3]]))
        for _ in range(10)
    ]  # fmt: skip
    for name in lighteval_adapter._SAME_METRIC:
        reference = LightevalMetrics[name].value
        ours = lighteval_adapter.adapt_metric(reference, "test")
        theirs = lighteval_adapter._through_lighteval(_repaired(reference), name, "test")
        assert ours.metric_name == theirs.metric_name == reference.metric_name
        docs = perplexity_cases if name in ("word_perplexity", "byte_perplexity", "bits_per_byte") else cases
        values = {}
        for label, metric in (("ours", ours), ("theirs", theirs)):
            samples = [metric.compute_sample(doc, response) for doc, response in docs]
            values[label] = aggregate_task_metrics([metric], samples)[reference.metric_name]
        assert values["ours"] == pytest.approx(values["theirs"], rel=1e-9), name


def test_a_metric_that_cannot_run_here_is_refused_by_name():
    _lighteval()
    from lighteval.metrics.metrics import Metrics as LightevalMetrics

    from lighteval_nanotron.tasks import lighteval_adapter

    with pytest.raises(ConfigError, match="maj_at_5.*GENERATIVE_SAMPLING"):
        lighteval_adapter.adapt_metric(LightevalMetrics.maj_at_5.value, "task x")


def test_without_lighteval_a_lighteval_task_file_fails_naming_the_extra(toy_data, monkeypatch):
    for name in [name for name in sys.modules if name == "lighteval" or name.startswith("lighteval.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "lighteval", None)  # what an environment without it sees
    path = helpers_pipeline.__file__.replace("helpers_pipeline.py", "lighteval_toy_tasks.py")
    with pytest.raises(CustomTasksError) as error:
        Registry(MC, custom_tasks=path)
    message = str(error.value)
    assert "\n" not in message and "lighteval-nanotron[lighteval]" in message and "lighteval_toy_tasks.py" in message


def _response(logprobs: list) -> ModelResponse:
    return ModelResponse(logprobs=logprobs, output_tokens=[[1], [2]], argmax_logits_eq_gold=[True, False])


def test_target_perplexity_runs_through_lightevals_implementation():
    """lighteval 0.10's target_perplexity is exp(-mean gold log-prob per doc), ours is per token: not mapped."""
    _lighteval()
    from lighteval.metrics.metrics import Metrics as LightevalMetrics

    from lighteval_nanotron.tasks import lighteval_adapter

    metric = lighteval_adapter.adapt_metric(LightevalMetrics.target_perplexity.value, "test")
    assert isinstance(metric.sample_level_fn, lighteval_adapter.LightevalSampleFn)
    docs = [
        (Doc(query="q", choices=[" a b", " c"], gold_index=0), _response([-2.0, -1.0])),
        (Doc(query="q", choices=[" d", " e f g"], gold_index=1), _response([-1.0, -4.0])),
    ]
    samples = [metric.compute_sample(doc, response) for doc, response in docs]
    value = aggregate_task_metrics([metric], samples)["ppl"]
    assert value == pytest.approx(math.exp(3.0))  # exp(-mean(-2, -4)): the gold choices' log-probs
