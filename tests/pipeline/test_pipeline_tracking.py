"""The pipeline's results through the loggers: files, TensorBoard, restart, `evaluate()`."""

import json

import helpers_pipeline
import pyarrow.parquet as pq
import pytest
from helpers_pipeline import ALL_TOY_TASKS, BigramLM
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.evaluate_once import as_engine, evaluate
from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings
from lighteval_nanotron.tracking import TrackingConfig, evaluated_steps, format_results_table
from lighteval_nanotron.tracking.plot import plot_results
from tests.helpers.results_layout import details_file, results_file

MC, GEN, PPL = "custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0"


def test_training_loop_writes_every_destination_and_skips_done_steps(toy_data, tmp_path):
    out = tmp_path / "out"
    pipeline = EvaluationPipeline.prepare(BigramLM(), ALL_TOY_TASKS, PipelineSettings(custom_tasks=helpers_pipeline))
    tracker = TrackingConfig(output_dir=str(out), loggers=["json", "details", "tensorboard"]).build()
    for step in (10, 20):
        result = pipeline.run(step=step, consumed_tokens=step * 512)
        tracker.log(result)
    tracker.close()

    content = json.loads(results_file(out, "toy-bigram", 20).read_text())
    assert content["config_general"]["consumed_tokens"] == 20 * 512
    assert content["results"][MC] == result.results[MC]

    details = pq.read_table(details_file(out, "toy-bigram", 20, GEN)).to_pylist()
    assert len(details) == 6
    assert {row["sampling_method"] for row in details} == {"LOGPROBS", "GENERATIVE"}
    assert sorted(row["metrics"]["em"] for row in details if row["sampling_method"] == "GENERATIVE") == [0, 1, 1]
    ppl = pq.read_table(details_file(out, "toy-bigram", 20, PPL)).to_pylist()
    assert json.loads(ppl[0]["metrics"]["word_perplexity"])[0] == pytest.approx(ppl[0]["logprobs"][0])

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars(f"eval/{MC}/acc")] == [(10, 0.75), (20, 0.75)]
    assert f"eval/{PPL}/bits_per_byte" in events.Tags()["scalars"]

    # a restarted run sees both steps done, and the curves plot from the same folder
    assert evaluated_steps(out, "toy-bigram") == {10, 20}
    assert len(plot_results(out, tmp_path / "plots")) == 5  # 4 tasks + "all"
    assert MC in format_results_table(result)


def test_evaluate_once_and_write(toy_data, tmp_path):
    result = evaluate(
        BigramLM(), tasks=f"{MC},{PPL}", custom_tasks=helpers_pipeline, output_dir=tmp_path, step=5, model_name="run-a"
    )
    assert result.results[MC]["acc"] == 0.75
    assert results_file(tmp_path, "run-a", 5).is_file()
    assert details_file(tmp_path, "run-a", 5, PPL).is_file()
    # called again at a later step, it continues the run's signal from the folder (docs/signal.md)
    later = evaluate(
        BigramLM(), tasks=MC, custom_tasks=helpers_pipeline, output_dir=tmp_path, step=9, model_name="run-a"
    )
    assert later.signal["series"][MC]["acc"]["evaluations"] == 2
    written = json.loads(results_file(tmp_path, "run-a", 9).read_text())
    assert written["signal"]["series"][MC]["acc"]["step"] == 9


def test_as_engine_needs_a_model_interface_or_a_nanotron_model_with_its_mesh():
    model = BigramLM()
    assert as_engine(model) is model
    with pytest.raises(ConfigError, match="already an evaluation model"):
        as_engine(model, parallel_context=object(), tokenizer=object())
    with pytest.raises(ConfigError, match="parallel_context and tokenizer"):
        as_engine(object())


def test_evaluate_takes_and_checks_the_options_of_the_hook_and_eval(toy_data, tmp_path):
    """`evaluate()` takes `EvaluationOptions` as keywords, checked as the hook checks them; it raises
    for failed tasks once the others are written, and records the step's identity, as the hook and
    `eval` do."""
    import broken_tasks

    from lighteval_nanotron.errors import EvaluationError

    with pytest.raises(ConfigError, match="bootstrap_iters is 1"):
        evaluate(BigramLM(), tasks=MC, custom_tasks=helpers_pipeline, bootstrap_iters=1)
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['bootstrap_iter'\]"):
        evaluate(BigramLM(), tasks=MC, custom_tasks=helpers_pipeline, bootstrap_iter=100)
    with pytest.raises(EvaluationError, match="toy_bad_metric.*injected metric failure"):
        evaluate(BigramLM(), tasks=f"{MC},custom|toy_bad_metric|0", custom_tasks=broken_tasks, output_dir=tmp_path,
                 step=3, model_name="run-b", bootstrap_iters=100)  # fmt: skip
    content = json.loads(results_file(tmp_path, "run-b", 3).read_text())
    assert set(content["results"]) == {MC} and set(content["failed_tasks"]) == {"custom|toy_bad_metric|0"}
    assert content["config_general"]["identity"]["bootstrap_iters"] == 100
