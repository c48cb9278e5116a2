"""`PipelineSettings`: the one object `EvaluationPipeline.prepare` takes besides the model and the
tasks, built from the hook's or `eval`'s options in one place, each field taking the option of its name."""

import dataclasses

import helpers_pipeline
from helpers_pipeline import BigramLM

from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.pipeline import PipelineSettings
from lighteval_nanotron.pipeline.settings import RUNTIME
from lighteval_nanotron.setup.tasks import load_tasks, prepare_pipeline

MC = "custom|toy_mc|0"
OPTIONS = [field.name for field in dataclasses.fields(PipelineSettings) if field.name not in RUNTIME]


def test_each_setting_is_the_option_of_its_name_with_the_options_default():
    options, settings = EvaluationOptions(tasks=MC), PipelineSettings()
    for name in OPTIONS:
        assert getattr(settings, name) == getattr(options, name), name
    for name in RUNTIME:  # the program's objects, not options a user writes
        assert not hasattr(options, name), name


def test_from_options_takes_every_option_the_pipeline_reads():
    options = EvaluationOptions(
        tasks=MC, max_samples=3, custom_tasks="tasks.py", fewshot_draws="per_doc", bootstrap_iters=50,
        model_name="team/run", held_out={"web": "/data/web"}, held_out_sequence_length=64, progress_bar=False,
        progress_interval_s=5,
    )  # fmt: skip
    settings = PipelineSettings.from_options(options)
    for name in OPTIONS:
        assert getattr(settings, name) == getattr(options, name), name
        assert getattr(settings, name) != getattr(PipelineSettings(), name), f"give {name} a value here"
    given = PipelineSettings.from_options(options, model_name="resolved", progress_log=print)
    assert (given.model_name, given.progress_log, given.max_samples) == ("resolved", print, 3)


def test_the_options_reach_the_pipeline_through_prepare_pipeline(toy_data):
    options = EvaluationOptions(tasks=MC, custom_tasks=helpers_pipeline.__file__, max_samples=2, bootstrap_iters=10)
    pipeline = prepare_pipeline(BigramLM(), load_tasks(options), options, "team/run")
    assert (pipeline.model_name, pipeline.max_samples, pipeline.bootstrap_iters) == ("team/run", 2, 10)
    result = pipeline.run(step=1)
    assert result.model_name == "team/run" and result.config_tasks[MC]["effective_num_docs"] == 2
