"""What one evaluation produces: aggregated scores, per-sample details and run metadata.

`EvaluationResult.to_dict()` is lighteval's results-file layout; loggers read this object and
decide where it goes (JSON, Parquet, TensorBoard, W&B).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lighteval_nanotron.errors import EvaluationError
from lighteval_nanotron.version import __version__

ALL_TASKS_KEY = "all"
TASK_COSTS_KEY = "task_costs"
GROUP_MARK = ":_average|"
"""In lighteval's group-average keys, `suite|name:_average|k` (`pipeline.aggregates`)."""
SUITE_SCORE_KEY = "suite_score"
SIGNAL_KEY = "signal"
VERSION_KEY = "lighteval_nanotron_version"
"""`config_general` key of this package's version: a results file written by this package."""
GENERATION_KEY = "generation_parameters"
"""`config_general` key of the run's generation parameters (recorded when a task generates)."""
WEIGHTS_KEY = "weights_fingerprint"
"""`config_general` key of the evaluated weights' fingerprint (`models.weights_fingerprint`)."""
GENERATIVE_KEY = "generative"
"""`config_tasks[task]` key: whether the task generates (its scores depend on the generation parameters)."""


@dataclass
class SampleDetail:
    """One doc scored with one sampling method: what the model saw, said, and how it scored."""

    task_name: str
    doc_id: str
    sampling_method: str
    query: str
    full_prompt: str
    choices: list[str]
    gold_index: list[int]
    gold: list[str]
    predictions: list[str]
    logprobs: list[float]
    argmax_logits_eq_gold: list[bool]
    unconditioned_logprobs: list[float] | None
    input_tokens: list[int]
    output_tokens: list[list[int]]
    truncated_tokens_count: int
    padded_tokens_count: int
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EvaluationResult:
    """The outcome of one `EvaluationPipeline.run()` on the reporting rank.

    `results` maps each task's full name (`suite|task|k`) to `{metric: value,
    metric_stderr: error}`, plus the cross-task average under `"all"`.
    """

    model_name: str
    results: dict[str, dict[str, float]]
    details: dict[str, list[SampleDetail]]
    versions: dict[str, int]
    config_tasks: dict[str, dict[str, Any]]
    summary_tasks: dict[str, dict[str, Any]]
    summary_general: dict[str, Any]
    wall_time_s: float
    start_time: float
    end_time: float
    step: int | None = None
    consumed_tokens: int | None = None
    consumed_train_samples: int | None = None
    max_samples: int | None = None
    extra_config: dict[str, Any] = field(default_factory=dict)
    failed_tasks: dict[str, str] = field(default_factory=dict)
    """`{task: reason}` of the tasks that failed (a metric raised, non-finite model outputs): they
    have no results or details; the other tasks' results are complete."""
    task_costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per evaluated task: `seconds` (its share of the model calls' time, `pipeline.task_costs`),
    `docs`, `docs_per_s`, `processed_tokens`, `useful_tokens`."""
    suite_score: dict[str, float] = field(default_factory=dict)
    """The centered suite score (`pipeline.aggregates.suite_score`): `{m_centered: value,
    m_centered_stderr: error}` for every centered metric; empty when no task has one."""
    signal: dict[str, Any] = field(default_factory=dict)
    """The signal across the run up to this evaluation (`analysis`), when the caller adds it."""

    @property
    def task_results(self) -> dict[str, dict[str, float]]:
        """Per-task scores, without the `"all"` average and lighteval's group averages."""
        return {
            name: scores for name, scores in self.results.items() if name != ALL_TASKS_KEY and GROUP_MARK not in name
        }

    @property
    def config_general(self) -> dict[str, Any]:
        """lighteval's `config_general` keys (None where this project has no such value), ours,
        and `config.general.step` / `consumed_train_samples` where lighteval's Nanotron runs kept
        the training config (Nanotron's `scripts/log_lighteval_to_wandb.py` reads them)."""
        return {
            "lighteval_sha": None,
            "num_fewshot_seeds": 1,
            "max_samples": self.max_samples,
            "job_id": None,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "total_evaluation_time_secondes": str(self.wall_time_s),
            "model_name": self.model_name,
            "model_sha": None,
            "model_dtype": None,
            "model_size": None,
            "generation_parameters": {},
            "config": {"general": {"step": self.step, "consumed_train_samples": self.consumed_train_samples}},
            VERSION_KEY: __version__,
            "training_step": self.step,
            "consumed_tokens": self.consumed_tokens,
            "consumed_train_samples": self.consumed_train_samples,
            "wall_time_s": self.wall_time_s,
            **self.extra_config,
        }

    def to_dict(self) -> dict[str, Any]:
        """The results file content, in lighteval's layout (details are stored separately), plus
        `task_costs` (what each task cost), `suite_score` and `signal` when there are any, and
        `failed_tasks` when a task failed."""
        content = {
            "config_general": self.config_general,
            "results": self.results,
            "versions": self.versions,
            "config_tasks": self.config_tasks,
            "summary_tasks": self.summary_tasks,
            "summary_general": self.summary_general,
        }
        if self.task_costs:
            content[TASK_COSTS_KEY] = self.task_costs
        if self.suite_score:
            content[SUITE_SCORE_KEY] = self.suite_score
        if self.signal:
            content[SIGNAL_KEY] = self.signal
        return {**content, "failed_tasks": self.failed_tasks} if self.failed_tasks else content


def raise_for_failed_tasks(result: EvaluationResult) -> None:
    """Raise EvaluationError naming each failed task and why (call it after the others are written)."""
    if result.failed_tasks:
        reasons = "; ".join(f"{task}: {reason}" for task, reason in result.failed_tasks.items())
        kept = len(result.task_results)
        raise EvaluationError(
            f"{len(result.failed_tasks)} task(s) failed at step {result.step} and have no results ({reasons}). "
            f"The {kept} other task(s) were evaluated and written, with the failures under failed_tasks."
        )
