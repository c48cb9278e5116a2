"""A task that fails costs only that task; wrong-looking numbers are refused, never reported as real."""

import dataclasses
import json
import logging
import math
import os
import stat
import types

import broken_tasks
import pytest
from helpers_pipeline import BigramLM

from lighteval_nanotron.errors import ConfigError, EvaluationError
from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings
from lighteval_nanotron.pipeline.apply_metrics import score_groups
from lighteval_nanotron.pipeline.request_groups import group_requests
from lighteval_nanotron.pipeline.result import raise_for_failed_tasks
from lighteval_nanotron.pipeline.summary import general_summary
from lighteval_nanotron.requests import ModelResponse
from lighteval_nanotron.tasks.lighteval_adapter import adapt_metric
from lighteval_nanotron.tracking import TrackingConfig, details_task_name
from tests.helpers.results_layout import details_folder, results_file

MC, GEN, PPL = "custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0"
BAD_METRIC, BAD_CORPUS = "custom|toy_bad_metric|0", "custom|toy_bad_corpus|0"


def _prepare(tasks: str, **kwargs) -> EvaluationPipeline:
    return EvaluationPipeline.prepare(BigramLM(), tasks, PipelineSettings(custom_tasks=broken_tasks, **kwargs))


def _strict(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_failing_metric_costs_only_its_task_and_is_recorded(toy_data, tmp_path):
    alone = _prepare(f"{MC},{GEN}").run(step=5)
    result = _prepare(f"{MC},{BAD_METRIC},{GEN},{BAD_CORPUS}").run(step=5)

    assert set(result.failed_tasks) == {BAD_METRIC, BAD_CORPUS}
    assert "injected metric failure" in result.failed_tasks[BAD_METRIC]
    assert "injected aggregation failure" in result.failed_tasks[BAD_CORPUS]
    assert result.results == {k: v for k, v in alone.results.items() if k != "all"}  # the others as if run alone
    assert "all" in alone.results  # and no average that misses a task asked for
    assert set(result.details) == {MC, GEN}
    tracker = TrackingConfig(output_dir=str(tmp_path / "out"), loggers=["json", "details"]).build()
    tracker.log(result)
    content = _strict(results_file(tmp_path / "out", "toy-bigram", 5).read_text())
    assert set(content["failed_tasks"]) == {BAD_METRIC, BAD_CORPUS} and set(content["results"]) == {MC, GEN}
    folder = details_folder(tmp_path / "out", "toy-bigram", 5)
    assert sorted(details_task_name(p) for p in folder.iterdir()) == sorted([MC, GEN])
    with pytest.raises(EvaluationError, match="toy_bad_metric.*injected metric failure"):
        raise_for_failed_tasks(result)


@pytest.mark.parametrize("task, gold", [("toy_gold_99", "99"), ("toy_gold_negative", "-1")])
def test_a_gold_index_out_of_range_names_the_task_and_row(toy_data, task, gold):
    with pytest.raises(ConfigError, match=rf"custom\|{task}\|0', row 1 .*gold index {gold} .*2 choices"):
        _prepare(f"{MC},custom|{task}|0")


def test_a_doc_without_choices_names_the_task_and_row(toy_data):
    """No choices crashed the chance level with a ZeroDivisionError."""
    with pytest.raises(ConfigError, match=r"custom\|toy_no_choices\|0', row 1 .*no choices"):
        _prepare(f"{MC},custom|toy_no_choices|0")


def test_a_pmi_metric_on_a_doc_without_an_unconditioned_query_names_the_task_and_row(toy_data):
    """PMI scores each choice again after the doc's unconditioned_query: a doc without one failed its task
    after the whole evaluation (MetricError, or lighteval's AssertionError for a lighteval metric)."""
    pattern = r"custom\|toy_pmi_no_unconditioned\|0', row 1 .*normalizes by PMI.*Set Doc.unconditioned_query"
    with pytest.raises(ConfigError, match=pattern):
        _prepare(f"{MC},custom|toy_pmi_no_unconditioned|0")
    try:
        from lighteval.metrics.metrics import Metrics as LightevalMetrics
        from lighteval.metrics.normalizations import LogProbPMINorm as LightevalPMI
    except ImportError:
        return
    their_pmi = LightevalMetrics.loglikelihood_acc(sample_params={"logprob_normalization": LightevalPMI()})
    module = types.ModuleType("lighteval_pmi")
    (config,) = [c for c in broken_tasks.TASKS_TABLE if c.name == "toy_pmi_no_unconditioned"]
    module.TASKS_TABLE = [dataclasses.replace(config, metrics=[adapt_metric(their_pmi, "test")])]
    with pytest.raises(ConfigError, match=pattern):
        EvaluationPipeline.prepare(
            BigramLM(), "custom|toy_pmi_no_unconditioned|0", PipelineSettings(custom_tasks=module)
        )


def test_a_gold_choice_repeated_as_a_wrong_choice_is_said_once_and_scored_as_lighteval_does(toy_data, caplog):
    """The gold's text also a wrong choice's: the two tie and the first ranks first (lighteval's
    argmax), so the doc counts by the choices' order. Real benchmark rows do this: said, not refused."""
    with caplog.at_level(logging.WARNING, logger="lighteval_nanotron.pipeline.pipeline"):
        pipeline = _prepare(f"{MC},custom|toy_gold_twice|0")
    (line,) = [r.getMessage() for r in caplog.records if "gold choice's text also as a wrong choice" in r.getMessage()]
    assert line.startswith("task custom|toy_gold_twice|0: 1 of ") and "(rows [1])" in line
    result = pipeline.run(step=1)
    assert "custom|toy_gold_twice|0" in result.results  # scored


def test_non_finite_logprobs_fail_their_task_with_the_count_of_docs(toy_data):
    pipeline = _prepare(f"{MC},{GEN}")
    responses = [pipeline.model.loglikelihood(list(group.docs)) for group in pipeline.groups[:1]]
    responses += [pipeline.model.greedy_until(list(group.docs)) for group in pipeline.groups[1:]]
    responses[0][2] = ModelResponse(logprobs=[float("nan"), -1.0], argmax_logits_eq_gold=[False, False])
    responses[0][3] = ModelResponse(logprobs=[float("-inf"), -1.0], argmax_logits_eq_gold=[False, False])
    responses[1][0] = ModelResponse(text=["x"], output_tokens=[[1]], non_finite_logits=True)
    groups = group_requests(pipeline.docs, [])
    assert [g.method for g in groups] == [g.method for g in pipeline.groups]
    scored = score_groups(pipeline.metrics_by_task, {MC: 4, GEN: 3}, groups, responses, str)
    assert scored.failed[MC].startswith("2 of 4 docs got non-finite")
    assert scored.failed[GEN].startswith("1 of 3 docs got non-finite")
    assert scored.details == {} and scored.sample_values == {}


def test_results_file_is_strict_json_with_non_finite_values_flagged(toy_data, tmp_path):
    result = _prepare(PPL, bootstrap_iters=1).run(step=3)
    assert math.isnan(result.results[PPL]["word_perplexity_stderr"])  # one bootstrap resample: no error bar
    TrackingConfig(output_dir=str(tmp_path), loggers=["json"]).build().log(result)
    content = _strict(results_file(tmp_path, "toy-bigram", 3).read_text())
    assert content["results"][PPL]["word_perplexity_stderr"] is None
    assert content["results"][PPL]["word_perplexity"] == pytest.approx(result.results[PPL]["word_perplexity"])
    assert f"results.{PPL}.word_perplexity_stderr" in content["config_general"]["non_finite_values"]


def test_results_merge_per_task_and_max_samples_and_respect_the_umask(toy_data, tmp_path):
    old_umask = os.umask(0o027)
    try:
        TrackingConfig(output_dir=str(tmp_path), loggers=["json", "details"]).build().log(_prepare(MC).run(step=7))
        path = results_file(tmp_path, "toy-bigram", 7)
        first = _strict(path.read_text())
        TrackingConfig(output_dir=str(tmp_path), loggers=["json"]).build().log(_prepare(GEN, max_samples=2).run(step=7))
    finally:
        os.umask(old_umask)
    assert results_file(tmp_path, "toy-bigram", 7) == path  # the step keeps its one file
    merged = _strict(path.read_text())
    assert merged["results"][MC] == first["results"][MC] and set(merged["results"]) == {MC, GEN, "all"}
    assert merged["results"]["all"]["acc"] == pytest.approx(
        (first["results"][MC]["acc"] + merged["results"][GEN]["acc"]) / 2
    )
    assert merged["config_general"]["max_samples_by_task"] == {MC: None, GEN: 2}
    assert set(merged["config_tasks"]) == set(merged["versions"]) == {MC, GEN} == set(merged["summary_tasks"])
    assert merged["summary_general"] == general_summary(merged["summary_tasks"])  # over both tasks
    assert merged["summary_general"]["num_samples"] == (
        first["summary_general"]["num_samples"] + merged["summary_tasks"][GEN]["num_samples"]
    )
    assert merged["task_costs"][MC] == first["task_costs"][MC] and set(merged["task_costs"]) == {MC, GEN}
    assert merged["task_costs"][GEN]["docs"] == 2
    for written in [path, *details_folder(tmp_path, "toy-bigram", 7).iterdir()]:
        assert stat.S_IMODE(written.stat().st_mode) == 0o640, written


@pytest.mark.parametrize("name", ["../../escaped", "/abs/escaped", "a/../../escaped", "..", "ok/..\\..\\escaped"])
def test_hostile_model_and_task_names_stay_inside_the_output_folder(toy_data, tmp_path, name):
    output_dir = tmp_path / "nest" / "out"
    result = _prepare(MC, model_name=name).run(step=1)
    result.details["../../../task"] = result.details[MC]
    TrackingConfig(output_dir=str(output_dir), loggers=["json", "details"]).build().log(result)
    written = [path for path in tmp_path.rglob("*") if path.is_file() and toy_data not in path.parents]
    assert written and all(output_dir in path.parents for path in written), written
