"""`EvaluationPipeline`: tasks -> docs -> requests by sampling method -> model -> metrics -> results.

Prepare once (registry, datasets, docs, prompts, the engine's tokenization and batch plan), then
`run()` at every checkpoint: only the forwards and the metrics happen there.

    pipeline = EvaluationPipeline.prepare(model, tasks="lighteval|arc:easy|0", max_samples=100)
    for step in checkpoints:
        result = pipeline.run(step=step)   # None on ranks that do not report
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.pipeline.model_calls import PreparedRequests, is_reporting_rank, prepare_requests, run_requests
from lighteval_nanotron.pipeline.progress import evaluation_progress
from lighteval_nanotron.pipeline.requests import RequestGroup, group_requests
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.pipeline.scoring import aggregate_results, score_groups
from lighteval_nanotron.pipeline.summary import summarize
from lighteval_nanotron.tasks import LightevalTask, PromptManager, Registry
from lighteval_nanotron.tasks.requests import Doc

logger = logging.getLogger(__name__)

TaskSelection = str | Path | Sequence[str] | Mapping[str, LightevalTask]


def load_tasks(tasks: TaskSelection, custom_tasks: str | Path | ModuleType | None = None) -> dict[str, LightevalTask]:
    """Task specs (comma list, list or file) or already-built tasks -> `{full_name: task}`."""
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
    return loaded


class EvaluationPipeline:
    """A set of tasks prepared for one model; `run()` evaluates the model's current weights."""

    def __init__(
        self,
        model: Any,
        tasks: Mapping[str, LightevalTask],
        docs: Mapping[str, list[Doc]],
        render_prompt: Callable[[Doc], str],
        model_name: str,
        max_samples: int | None = None,
        bootstrap_iters: int | None = None,
        show_progress: bool = False,
    ) -> None:
        """Use `EvaluationPipeline.prepare(...)`; this only stores what prepare built."""
        self.model = model
        self.tasks = dict(tasks)
        self.docs = dict(docs)
        self.render_prompt = render_prompt
        self.model_name = model_name
        self.max_samples = max_samples
        self.bootstrap_iters = bootstrap_iters
        self.show_progress = show_progress
        self.metrics_by_task = {name: list(task.metrics) for name, task in self.tasks.items()}
        unconditioned = [
            name
            for name, metrics in self.metrics_by_task.items()
            if any(getattr(m, "requires_unconditioned_logprobs", False) for m in metrics)
        ]
        self.groups: list[RequestGroup] = group_requests(self.docs, unconditioned)
        self.prepared: PreparedRequests = prepare_requests(model, self.groups)

    @classmethod
    def prepare(
        cls,
        model: Any,
        tasks: TaskSelection,
        max_samples: int | None = None,
        *,
        custom_tasks: str | Path | ModuleType | None = None,
        model_name: str | None = None,
        prompt_manager: PromptManager | None = None,
        bootstrap_iters: int | None = None,
        show_progress: bool = False,
    ) -> EvaluationPipeline:
        """Load tasks and datasets, build docs (with few-shot examples) and let the model plan its
        requests. Every problem with a task (unknown name, missing dataset, bad prompt function)
        raises here, before any evaluation.

        Args:
            model: An engine model (`loglikelihood`, `loglikelihood_rolling`, `greedy_until`).
            tasks: Task specs (`"suite|task|k,..."`, a list, a file of specs) or `{name: LightevalTask}`.
            max_samples: At most this many docs per task (a fixed subset), None for all.
            custom_tasks: A `.py` file, module name or module with a `TASKS_TABLE` of extra tasks.
            model_name: Name in results and output paths; default `model.model_name` or "model".
            prompt_manager: How docs become prompts in the details when the model does not
                return its input; default the model's `prompt_fn`, else plain text.
            bootstrap_iters: Bootstrap resamples for non-mean metrics' standard errors.
            show_progress: Show a bar per evaluation (docs done, docs/s, ETA) on this process
                when stderr is a terminal; pass True on one rank only (e.g. world rank 0).
        """
        if max_samples is not None and max_samples < 1:
            raise ConfigError(f"max_samples={max_samples}: use a positive number, or None for every doc.")
        loaded = load_tasks(tasks, custom_tasks)
        docs = {name: task.get_docs(max_samples) for name, task in loaded.items()}
        name = model_name or getattr(model, "model_name", None) or "model"
        logger.info("Prepared %d task(s), %d docs: %s", len(docs), sum(map(len, docs.values())), ", ".join(docs))
        if prompt_manager is not None:
            render_prompt = prompt_manager.prepare_prompt
        else:
            render_prompt = getattr(model, "prompt_fn", None) or PromptManager().prepare_prompt
        return cls(
            model,
            loaded,
            docs,
            render_prompt,
            str(name),
            max_samples=max_samples,
            bootstrap_iters=bootstrap_iters,
            show_progress=show_progress,
        )

    def run(self, step: int | None = None, consumed_tokens: int | None = None) -> EvaluationResult | None:
        """Evaluate the model as it is now. Every rank must call this (the model's forwards are
        collective); the reporting rank gets the `EvaluationResult`, the others None."""
        start_time, start = time.time(), time.perf_counter()
        total_docs = sum(len(group.docs) for group in self.groups)
        with evaluation_progress(total_docs, step, self.show_progress) as progress:
            responses = run_requests(self.model, self.prepared, progress)
        if not is_reporting_rank(self.model):
            return None
        sample_values, details = score_groups(
            self.metrics_by_task,
            {name: len(docs) for name, docs in self.docs.items()},
            self.groups,
            responses,
            self.render_prompt,
        )
        results = aggregate_results(self.metrics_by_task, sample_values, self.bootstrap_iters)
        summary_tasks, summary_general = summarize(details)
        wall_time = time.perf_counter() - start
        return EvaluationResult(
            model_name=self.model_name,
            results=results,
            details=details,
            versions={name: task.version for name, task in self.tasks.items()},
            config_tasks={name: task.config.as_dict() for name, task in self.tasks.items()},
            summary_tasks=summary_tasks,
            summary_general=summary_general,
            wall_time_s=wall_time,
            start_time=start_time,
            end_time=start_time + wall_time,
            step=step,
            consumed_tokens=consumed_tokens,
            max_samples=self.max_samples,
        )
