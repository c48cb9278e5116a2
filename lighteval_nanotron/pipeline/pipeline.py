"""`EvaluationPipeline`: tasks -> docs -> requests by sampling method -> model -> metrics -> results.

Prepare once (registry, datasets, docs, prompts, the engine's tokenization and batch plan), then
`run()` at every checkpoint: only the forwards and the metrics happen there. On a mesh, datasets,
docs and tokens are built by one rank and broadcast (the model's `computed_once`), not per rank.

    pipeline = EvaluationPipeline.prepare(model, "lighteval|arc:easy|0", PipelineSettings(max_samples=100))
    for step in checkpoints:
        result = pipeline.run(step=step)   # None on ranks that do not report
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.metrics.chance import centered_metrics, chance_levels, higher_is_better
from lighteval_nanotron.models.interface import LightevalModel
from lighteval_nanotron.pipeline.aggregates import suite_score
from lighteval_nanotron.pipeline.apply_metrics import aggregate_results, score_groups
from lighteval_nanotron.pipeline.doc_checks import check_choices, check_metric_docs
from lighteval_nanotron.pipeline.held_out import PreparedHeldOut, held_out_results, prepare_held_out, run_held_out
from lighteval_nanotron.pipeline.model_calls import PreparedRequests, check_model, prepare_requests, run_requests
from lighteval_nanotron.pipeline.progress import EvaluationProgress
from lighteval_nanotron.pipeline.request_groups import RequestGroup, group_requests
from lighteval_nanotron.pipeline.result import GENERATION_KEY, GENERATIVE_KEY, EvaluationResult
from lighteval_nanotron.pipeline.settings import PipelineSettings
from lighteval_nanotron.pipeline.summary import summarize
from lighteval_nanotron.pipeline.task_costs import task_costs
from lighteval_nanotron.requests import Doc, GenerationParameters, SamplingMethod
from lighteval_nanotron.requests.doc import DOCS_DIGEST, docs_digest
from lighteval_nanotron.tasks import LightevalTask, PromptManager, Registry
from lighteval_nanotron.tasks.data_origin import KINDS

logger = logging.getLogger(__name__)

TaskSelection = str | Path | Sequence[str] | Mapping[str, LightevalTask]


def load_tasks(
    tasks: TaskSelection,
    custom_tasks: str | Path | ModuleType | None = None,
    fewshot_draws: str | None = None,
) -> dict[str, LightevalTask]:
    """Task specs (comma list, list or file) or already-built tasks -> `{full_name: task}`.

    `fewshot_draws` (`lighteval` or `per_doc`) overrides every task's few-shot draw mode.
    """
    if isinstance(tasks, Mapping):
        loaded = dict(tasks)
    else:
        loaded = Registry(
            tasks=tasks if isinstance(tasks, (str, Path)) else list(tasks), custom_tasks=custom_tasks
        ).load_tasks()
    if not loaded:
        raise ConfigError("No task to evaluate: pass task specs such as tasks='lighteval|arc:easy|0'.")
    for name, task in loaded.items():
        if not task.metrics:
            raise ConfigError(f"Task {name!r} has no metrics: give its LightevalTaskConfig at least one metric.")
        if fewshot_draws is not None:
            task.set_fewshot_draws(fewshot_draws)
    return loaded


@dataclass(frozen=True)
class TaskDocs:
    """A task's docs ready to run, and the counts its results report (`original_num_docs`: the
    evaluation split's, `effective_num_docs`: after `max_samples`)."""

    docs: list[Doc]
    original_num_docs: int
    effective_num_docs: int
    fewshot_self_draws: int = 0
    fewshot_short_docs: int = 0
    data_source: dict = field(default_factory=dict)
    """Where the docs came from, rows available, cap asked and met (`LightevalTask.data_source_record`)."""


def build_docs(tasks: Mapping[str, LightevalTask], max_samples: int | None) -> dict[str, TaskDocs]:
    """Load every task's dataset and build its docs, prompts' few-shot examples included. A task with
    fewer docs than `max_samples` asks for is evaluated on all it has, with a warning saying so."""
    built = {}
    for name, task in tasks.items():
        docs = task.get_docs(max_samples)
        source = task.data_source_record(max_samples)
        if not source["cap_met"]:
            logger.warning("%s", cap_note(name, source))
        built[name] = TaskDocs(
            docs,
            task.config.original_num_docs,
            task.config.effective_num_docs,
            task.fewshot_self_draws,
            task.fewshot_short_docs,
            source,
        )
    return built


def cap_note(task_name: str, source: Mapping[str, Any]) -> str:
    """One line: the cap was not met, and what the docs are a part of."""
    where = KINDS.get(source.get("kind", ""), "its dataset")
    rows = ", ".join(f"{count} rows of {split}" for split, count in source["rows"].items())
    part = "; a slice of the benchmark, not the full split" if source["slice"] else ""
    return (
        f"Task {task_name}: max_samples {source['max_samples']} asked for, but {where} holds "
        f"{source['docs_available']} docs ({rows}{part}): all {source['docs_evaluated']} are evaluated."
    )


def share_docs(
    model: LightevalModel,
    tasks: Mapping[str, LightevalTask],
    max_samples: int | None,
    docs: Mapping[str, TaskDocs] | None = None,
) -> dict[str, list[Doc]]:
    """`build_docs` once for the whole mesh (the model's `computed_once`: on the Nanotron engine one
    rank loads the datasets and builds the docs, every rank receives them); `docs` when already
    built. The tasks' doc counts are set on every rank."""
    if docs is None:
        docs = model.computed_once(lambda: build_docs(tasks, max_samples))
    for name, task in tasks.items():
        task.config.original_num_docs = docs[name].original_num_docs
        task.config.effective_num_docs = docs[name].effective_num_docs
        task.fewshot_self_draws = docs[name].fewshot_self_draws
        task.fewshot_short_docs = docs[name].fewshot_short_docs
        task.data_source = dict(docs[name].data_source)
    return {name: docs[name].docs for name in tasks}


class EvaluationPipeline:
    """A set of tasks prepared for one model; `run()` evaluates the model's current weights."""

    def __init__(
        self,
        model: LightevalModel,
        tasks: Mapping[str, LightevalTask],
        docs: Mapping[str, list[Doc]],
        settings: PipelineSettings,
        held_out: PreparedHeldOut | None = None,
    ) -> None:
        """Use `EvaluationPipeline.prepare(...)`; this only stores what prepare built."""
        self.model = model
        self.tasks = dict(tasks)
        self.docs = dict(docs)
        manager = settings.prompt_manager
        self.render_prompt: Callable[[Doc], str] = (
            manager.prepare_prompt if manager is not None else model.prompt_fn or PromptManager().prepare_prompt
        )
        owner = getattr(self.render_prompt, "__self__", None)
        self.model_name = str(settings.model_name or model.model_name or "model")
        self.max_samples = settings.max_samples
        self.bootstrap_iters = settings.bootstrap_iters
        self.show_progress = settings.progress_bar and model.is_reporting_rank  # once for the mesh
        self.progress_log = settings.progress_log if self.show_progress else None
        self.progress_interval_s = settings.progress_interval_s
        self.metrics_by_task = {
            name: [*task.metrics, *centered_metrics(task.metrics, self.docs[name])] for name, task in self.tasks.items()
        }
        for name, metrics in self.metrics_by_task.items():
            check_metric_docs(name, metrics, self.docs[name])
        self.metric_info = {
            name: {
                "higher_is_better": higher_is_better(metrics),
                "chance": chance_levels(metrics, self.docs[name]),
                GENERATIVE_KEY: SamplingMethod.GENERATIVE in self.tasks[name].sampling_methods,
            }
            for name, metrics in self.metrics_by_task.items()
        }
        """Per task, each result key's direction and chance level, and whether it generates
        (`config_tasks`, for the signal analysis and the step's settings)."""
        generation = getattr(getattr(model, "config", None), "generation", None)
        self.settings = dict(owner.settings()) if isinstance(owner, PromptManager) else {}
        """How prompts were rendered (chat template, system prompt) and, when a task generates, how
        generations were decoded (the model's defaults, which a task's own `generation_parameters`
        override), recorded in `config_general`."""
        if any(info[GENERATIVE_KEY] for info in self.metric_info.values()):
            self.settings[GENERATION_KEY] = generation.as_dict() if isinstance(generation, GenerationParameters) else {}
        unconditioned = [
            name
            for name, metrics in self.metrics_by_task.items()
            if any(getattr(m, "requires_unconditioned_logprobs", False) for m in metrics)
        ]
        self.groups: list[RequestGroup] = group_requests(self.docs, unconditioned)
        self.prepared: PreparedRequests = prepare_requests(model, self.groups)
        self.held_out = held_out or PreparedHeldOut()
        """The held-out domains' windows and plans (`pipeline.held_out`)."""
        self.digests = {**{name: docs_digest(docs) for name, docs in self.docs.items()}, **self.held_out.digests}
        """`{results key: digest}` of the data each task and domain is scored on (docs, windows):
        the per-task part of a step's identity."""

    @property
    def result_names(self) -> list[str]:
        """Every results key an evaluation writes for this pipeline: the tasks, then `heldout|<name>`."""
        return [*self.tasks, *self.held_out.keys]

    @classmethod
    def prepare(
        cls, model: LightevalModel, tasks: TaskSelection, settings: PipelineSettings | None = None
    ) -> EvaluationPipeline:
        """Load tasks and datasets, build docs (with few-shot examples) and let the model plan its
        requests. Every problem with a task (unknown name, missing dataset, bad prompt function)
        raises here, before any evaluation.

        Args:
            model: A `LightevalModel` (`models.interface`: `loglikelihood`, `loglikelihood_rolling`,
                `greedy_until`; a `PlanningModel` such as the Nanotron engine plans them here). It
                holds its tokenizer: the one that plans the requests is the one that scores them.
            tasks: Task specs (`"suite|task|k,..."`, a list, a file of specs) or `{name: LightevalTask}`;
                may be empty when `settings` names held-out domains.
            settings: Everything else (`PipelineSettings`: max_samples, custom tasks, model name,
                prompts, held-out domains, progress, ...); None: the defaults.
        """
        settings = settings or PipelineSettings()
        check_model(model)
        held_out = list(settings.held_out_specs)
        loaded = {} if held_out and not tasks else load_tasks(tasks, settings.custom_tasks, settings.fewshot_draws)
        task_docs = share_docs(model, loaded, settings.max_samples, settings.docs)
        warnings = [line for name, docs_of_task in task_docs.items() for line in check_choices(name, docs_of_task)]
        if model.is_reporting_rank:  # said once for the mesh
            docs_count = sum(map(len, task_docs.values()))
            logger.info("Prepared %d task(s), %d docs: %s", len(task_docs), docs_count, ", ".join(task_docs))
            for line in warnings:
                logger.warning(line)
        prepared_held_out = prepare_held_out(model, held_out, settings.held_out_sequence_length)
        return cls(model, loaded, task_docs, settings, prepared_held_out)

    def run(
        self, step: int | None = None, consumed_tokens: int | None = None, consumed_train_samples: int | None = None
    ) -> EvaluationResult | None:
        """Evaluate the model as it is now. Every rank must call this (the model's forwards are
        collective); the reporting rank gets the `EvaluationResult`, the others None."""
        start_time, start = time.time(), time.perf_counter()
        task_docs = sum(len(group.docs) for group in self.groups)
        with EvaluationProgress(
            task_docs + self.held_out.windows, step, self.show_progress, self.progress_log, self.progress_interval_s
        ) as progress:
            runs = run_requests(self.model, self.prepared, progress)
            held_out_runs = run_held_out(self.model, self.held_out, progress, task_docs)
        if not self.model.is_reporting_rank:
            return None
        responses = [run.responses for run in runs]
        scored = score_groups(
            self.metrics_by_task,
            {name: len(docs) for name, docs in self.docs.items()},
            self.groups,
            responses,
            self.render_prompt,
        )
        costs = task_costs(self.groups, runs, {name: len(docs) for name, docs in self.docs.items()})
        failed = dict(scored.failed)
        results = aggregate_results(self.metrics_by_task, scored.sample_values, self.bootstrap_iters, failed)
        for task, reason in failed.items():
            logger.error("Task %s failed, its results are left out: %s", task, reason)
        details = {task: rows for task, rows in scored.details.items() if task not in failed}
        evaluated = [name for name in self.tasks if name not in failed]
        held_out = held_out_results(self.held_out, held_out_runs)
        for key, reason in held_out.failed.items():
            logger.error("Held-out domain %s failed, its results are left out: %s", key, reason)
        results.update(held_out.results)
        details.update(held_out.details)
        failed.update(held_out.failed)
        summary_tasks, summary_general = summarize(details)
        wall_time = time.perf_counter() - start
        return EvaluationResult(
            model_name=self.model_name,
            results=results,
            details=details,
            versions={**{name: self.tasks[name].version for name in evaluated}, **dict.fromkeys(held_out.results, 0)},
            config_tasks={
                **{
                    name: {
                        **self.tasks[name].config.as_dict(),
                        "fewshot_sampling": self.tasks[name].fewshot_record(),
                        "data_source": self.tasks[name].data_source,
                        DOCS_DIGEST: self.digests[name],
                        **self.metric_info[name],
                    }
                    for name in evaluated
                },
                **held_out.config_tasks,
            },
            summary_tasks=summary_tasks,
            summary_general=summary_general,
            wall_time_s=wall_time,
            start_time=start_time,
            end_time=start_time + wall_time,
            step=step,
            consumed_tokens=consumed_tokens,
            consumed_train_samples=consumed_train_samples,
            max_samples=self.max_samples,
            failed_tasks={name: failed[name] for name in self.result_names if name in failed},
            extra_config=dict(self.settings),
            task_costs={**{name: costs[name].to_dict() for name in evaluated}, **held_out.task_costs},
            suite_score=suite_score(results, failed),
        )
