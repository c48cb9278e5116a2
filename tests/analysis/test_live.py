"""The hook's running signal: what a restarted run finds on disk, then each new evaluation, into
the results file and the scalars."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipeline"))

import helpers_pipeline  # noqa: E402
from helpers_pipeline import BigramLM, write_datasets  # noqa: E402

from lighteval_nanotron.analysis import LiveSignal  # noqa: E402
from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings  # noqa: E402
from lighteval_nanotron.tasks.data_dirs import ENV_VAR  # noqa: E402
from lighteval_nanotron.tracking import TrackingConfig, result_scalars, results_files_by_step  # noqa: E402

MC, MC_1SHOT = "custom|toy_mc|0", "custom|toy_mc|1"


def test_restarted_run_continues_its_signal_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(write_datasets(tmp_path / "data")))
    out = tmp_path / "out"
    pipeline = EvaluationPipeline.prepare(
        BigramLM(), MC, PipelineSettings(custom_tasks=helpers_pipeline, model_name="team/run")
    )
    tracker = TrackingConfig(output_dir=str(out), loggers=["json"]).build()

    first = LiveSignal(out, "team/run")
    for step in (10, 20, 30):
        result = pipeline.run(step=step)
        first.attach(result)
        tracker.log(result)
    assert result.signal["series"][MC]["acc"]["evaluations"] == 3

    # a restart from the step-20 checkpoint: the files hold 10, 20, 30; step 40 sees all of them,
    # an evaluation of step 20 again sees only what came before it
    restarted = LiveSignal(out, "team/run")
    again = pipeline.run(step=20)
    restarted.attach(again)
    assert again.signal["series"][MC]["acc"]["evaluations"] == 2
    later = pipeline.run(step=40)
    restarted.attach(later)
    tracker.log(later)
    acc = later.signal["series"][MC]["acc"]
    assert acc["evaluations"] == 4 and acc["verdict"] == "not yet above chance" or acc["noise"] == 0.0
    written = json.loads(results_files_by_step(out, "team/run")[40].read_text())
    assert written["signal"]["series"][MC]["acc"]["evaluations"] == 4
    assert written["signal"]["settings"]["window"] == 5
    scalars = result_scalars(later)
    assert scalars[f"eval_signal/{MC}/acc/verdict_code"] == acc["verdict_code"]
    assert "eval_signal/suite_score/acc_centered/trend" in scalars


def test_a_result_without_a_step_gets_no_signal(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(write_datasets(tmp_path / "data")))
    pipeline = EvaluationPipeline.prepare(BigramLM(), MC, PipelineSettings(custom_tasks=helpers_pipeline))
    result = pipeline.run()
    LiveSignal(tmp_path / "out", "toy-bigram").attach(result)
    assert result.signal == {} and "signal" not in result.to_dict()


def test_a_step_evaluated_in_two_parts_gets_the_whole_steps_signal(tmp_path, monkeypatch):
    """A backfill adding a task to a step already written: the signal is that of the merged file."""
    monkeypatch.setenv(ENV_VAR, str(write_datasets(tmp_path / "data")))
    out = tmp_path / "out"
    tracker = TrackingConfig(output_dir=str(out), loggers=["json"]).build()
    first = EvaluationPipeline.prepare(
        BigramLM(), MC, PipelineSettings(custom_tasks=helpers_pipeline, model_name="team/run")
    )
    result = first.run(step=10)
    LiveSignal(out, "team/run").attach(result)
    tracker.log(result)
    added = EvaluationPipeline.prepare(
        BigramLM(), MC_1SHOT, PipelineSettings(custom_tasks=helpers_pipeline, model_name="team/run")
    )
    part = added.run(step=10)
    LiveSignal(out, "team/run").attach(part)
    tracker.log(part)
    written = json.loads(results_files_by_step(out, "team/run")[10].read_text())
    assert {MC, MC_1SHOT} <= set(written["results"]) and {MC, MC_1SHOT} <= set(written["signal"]["series"])
    whole = written["suite_score"]["acc_centered_stderr"]  # of the mean of two tasks: sqrt(2 x 0.5^2) / 2
    assert whole == pytest.approx(0.5 / 2**0.5) and part.suite_score["acc_centered_stderr"] == 0.5
    assert written["signal"]["series"]["suite_score"]["acc_centered"]["stderr"] == whole
