"""Tasks and the prepared pipeline from the options: data dirs first, then the tasks (an unknown
task fails here, before any model work), then prompts, tokens and batch plans once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.requests.held_out import held_out_key
from lighteval_nanotron.tasks import get_data_dirs, set_data_dirs

if TYPE_CHECKING:
    from lighteval_nanotron.models.interface import LightevalModel
    from lighteval_nanotron.pipeline import EvaluationPipeline
    from lighteval_nanotron.pipeline.pipeline import TaskDocs
    from lighteval_nanotron.requests.held_out import HeldOutSet
    from lighteval_nanotron.tasks import LightevalTask


def use_data_dirs(options: EvaluationOptions) -> None:
    """The options' data dirs, searched before those already in effect (`$LIGHTEVAL_NANOTRON_DATA_DIRS`)."""
    if options.data_dirs:
        set_data_dirs(list(dict.fromkeys([*options.data_dirs, *get_data_dirs()])))


def load_tasks(options: EvaluationOptions) -> dict[str, Any]:
    """`{name: task}` of the options' tasks, after setting their data dirs (every rank; no collective)."""
    from lighteval_nanotron.pipeline import load_tasks as load

    use_data_dirs(options)
    return load(options.tasks, options.custom_tasks, options.fewshot_draws) if options.tasks else {}


def result_names(options: EvaluationOptions, tasks: Mapping[str, Any]) -> list[str]:
    """The results keys an evaluation of every task (`load_tasks`) and held-out domain writes."""
    return [*tasks, *(held_out_key(spec.name) for spec in options.held_out_specs)]


def prepare_pipeline(
    engine: LightevalModel,
    tasks: dict[str, LightevalTask],
    options: EvaluationOptions,
    model_name: str,
    docs: Mapping[str, TaskDocs] | None = None,
    sequence_length: int | None = None,
    held_out: list[HeldOutSet] | None = None,
    progress_log: Callable[[str], None] | None = None,
) -> EvaluationPipeline:
    """The `EvaluationPipeline` of `tasks` and the options' held-out domains (collective: the
    datasets are opened, the prompts and held-out text tokenized once, then broadcast; `docs` when
    they were already built). Held-out windows are `held_out_sequence_length` long, else
    `sequence_length` (the training's), else the model's positions; `held_out`: the domains'
    `HeldOutSet`s when already built on every rank (`eval` builds them to plan). Progress on the
    reporting rank only: a bar on a terminal, and lines to `progress_log` (the caller's log) every
    `progress_interval_s`, when `progress_bar` is on."""
    from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings

    resolved = {
        "model_name": model_name,
        "held_out_sequence_length": options.held_out_sequence_length or sequence_length,
        **({} if held_out is None else {"held_out_specs": held_out}),
    }
    settings = PipelineSettings.from_options(options, docs=docs, progress_log=progress_log, **resolved)
    return EvaluationPipeline.prepare(engine, tasks, settings)
