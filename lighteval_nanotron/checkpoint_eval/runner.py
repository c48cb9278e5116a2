"""Evaluate saved Nanotron checkpoints: one folder, or every step of a training run (backfill).

    config = CheckpointEvalConfig(tasks="lighteval|arc:easy|0", checkpoints_dir="checkpoints", tp=2, cpu=True)
    results = evaluate_checkpoints(config)     # every rank calls it (under torchrun)

Order of work, each step agreed on by every rank so that a failure stops all of them together:
read the checkpoints, their model config and the tokenizer and check the layout; load the tasks
and their docs (an unknown task or missing dataset fails here); build the sharded model once and
prepare prompts, tokens and batches once; then per checkpoint only load its weights into that
model, run the forwards and the metrics, and write the results with the tracking loggers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

from lighteval_nanotron.checkpoint_eval.discovery import (
    CheckpointInfo,
    checkpoint_info,
    default_model_name,
    find_checkpoints,
    pending_tasks,
)
from lighteval_nanotron.checkpoint_eval.loading import check_same_model, load_tokenizer, resolve_dtype, tokenizer_source
from lighteval_nanotron.checkpoint_eval.mesh_setup import AGREEMENT_TIMEOUT_S, collectively, parallel_context_for
from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.checkpoint.format import CheckpointModel, read_checkpoint_model
from lighteval_nanotron.models.nanotron_builder import build_nanotron_model, check_model_layout, load_checkpoint_weights
from lighteval_nanotron.nanotron_compat.imports import import_nanotron_trainer
from lighteval_nanotron.parallel.once import computed_once
from lighteval_nanotron.pipeline.result import EvaluationResult, raise_for_failed_tasks
from lighteval_nanotron.requests import GenerationParameters

logger = logging.getLogger(__name__)


@dataclass
class CheckpointEvalConfig:
    """What to evaluate, at which layout, and where the results go."""

    tasks: str
    """Task specs (`suite|task|k,...`) or a file of specs, one or more a line."""
    checkpoint: str | None = None
    """One checkpoint folder (exclusive with `checkpoints_dir`)."""
    checkpoints_dir: str | None = None
    """A training output folder: every numbered step folder in it, in step order, skipping steps
    whose results already exist in `output_dir`."""
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cpu: bool = False
    """Run on CPU with gloo (Nanotron patched by `enable_cpu_support()`); else CUDA with NCCL."""
    dtype: str | None = None
    """float32, bfloat16 or float16. Unset: the checkpoint's `model.dtype`, else float32."""
    tokenizer: str | None = None
    """Tokenizer folder or name. Unset: the checkpoint folder, else its config's tokenizer."""
    custom_tasks: str | None = None
    max_samples: int | None = None
    fewshot_draws: str | None = None
    """`lighteval` or `per_doc` few-shot draws for every task. Unset: each task's own."""
    data_dirs: list[str] = field(default_factory=list)
    """Searched before `$LIGHTEVAL_NANOTRON_DATA_DIRS` (`bundled` for the shipped slices)."""
    tokens_per_batch: int = 8192
    """Token budget of one micro-batch per data-parallel replica."""
    use_chat_template: bool = False
    """Render prompts with the tokenizer's chat template (checked before the model is built)."""
    system_prompt: str | None = None
    """The system turn with the chat template, else the first paragraph of every prompt."""
    pairwise_tokenization: bool = False
    """Tokenize context and continuation separately (lighteval's `pairwise_tokenization`)."""
    multichoice_continuations_start_space: bool | None = None
    """Multiple choice: True adds a leading space to each choice, False strips it, None as written."""
    generation: dict[str, Any] | None = None
    """Decoding settings of generative tasks (`GenerationParameters` keys: temperature, top_k,
    top_p, num_samples, seed). Unset: greedy."""
    output_dir: str = "eval_results"
    model_name: str | None = None
    """Name in the results paths. Unset: the name the training hook uses (config.yaml's
    `lighteval_nanotron.model_name`, else `project/run`), else the folder name."""
    loggers: list[str] = field(default_factory=lambda: ["json", "details", "tensorboard"])
    tensorboard_prefix: str = "eval"
    """TensorBoard tags are `<prefix>/<task>/<metric>`."""
    wandb_project: str | None = None
    """W&B project of the `wandb` logger's run. Unset: `WANDB_PROJECT`."""
    wandb_entity: str | None = None
    failure_timeout_s: float = AGREEMENT_TIMEOUT_S
    """Seconds any wait on another rank (a collective, a pipeline transfer, the agreement on a
    stage's outcome) may take before the evaluation stops with an EvaluationError."""
    progress_bar: bool = True
    """A bar per checkpoint on world rank 0 (docs done, docs/s, ETA), shown only on a terminal."""

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.checkpoints_dir is None):
            raise ConfigError(
                "Give exactly one of a checkpoint folder, --checkpoint-config-path or --checkpoints-dir "
                "(or checkpoints_path in the lighteval config)."
            )
        if self.max_samples is not None and self.max_samples < 1:
            raise ConfigError(
                f"--max-samples {self.max_samples}: use a positive number (or leave it out for all docs)."
            )
        if not self.failure_timeout_s > 0:
            raise ConfigError(f"--failure-timeout-s {self.failure_timeout_s}: use a positive number of seconds.")
        if self.tokens_per_batch < 1:
            raise ConfigError(f"--tokens-per-batch {self.tokens_per_batch}: use a positive number, e.g. 8192.")
        if self.system_prompt is not None and not self.system_prompt.strip():
            raise ConfigError("--system-prompt is empty: give a prompt or leave it out.")
        GenerationParameters.from_dict(self.generation)  # refuse bad values before any rank loads a model


@dataclass
class EvaluationPlan:
    """What the setup found, identical on every rank."""

    checkpoints: list[CheckpointInfo]
    """Still to evaluate, in step order."""
    skipped_steps: list[int]
    """Steps with results for every task already."""
    checkpoint_model: CheckpointModel
    model_name: str
    tokenizer: Any
    prompts: Any
    """The `PromptManager` (plain text or chat template, system prompt), checked against the tokenizer."""
    tasks: dict[str, Any]
    tasks_by_step: dict[int | None, list[str]] = field(default_factory=dict)
    """The tasks still to evaluate at each pending step (all of them when the step has no results)."""
    docs: dict[str, Any] = field(default_factory=dict)
    """Every task's `TaskDocs`, built on world rank 0 and broadcast (datasets opened once)."""


def _discover(config: CheckpointEvalConfig) -> list[CheckpointInfo]:
    if config.checkpoints_dir is not None:
        return find_checkpoints(config.checkpoints_dir)
    return [checkpoint_info(config.checkpoint)]


def _done_tasks(output_dir: str, model_name: str, world: Any) -> dict[int, set[tuple[str, int | None]]]:
    """(task, max_samples) already evaluated per step, as any rank sees them (the reporting rank
    writes them; ranks need not share a filesystem): gathered once, the same union on every rank."""
    from lighteval_nanotron.tracking import evaluated_tasks_by_step

    gathered: list[Any] = [None] * dist.get_world_size(world)
    dist.all_gather_object(gathered, evaluated_tasks_by_step(output_dir, model_name), group=world)
    done: dict[int, set[tuple[str, int | None]]] = {}
    for part in gathered:
        for step, pairs in part.items():
            done.setdefault(step, set()).update(pairs)
    return done


def _read_models(checkpoints: list[CheckpointInfo], config: CheckpointEvalConfig) -> tuple[CheckpointModel, str]:
    checkpoint_model = read_checkpoint_model(checkpoints[0].path)
    for info in checkpoints[1:]:
        check_same_model(checkpoint_model, read_checkpoint_model(info.path), info.path)
    check_model_layout(checkpoint_model.model_config, config.tp, config.pp)
    resolve_dtype(config.dtype, checkpoints[0].path)
    return checkpoint_model, config.model_name or default_model_name(checkpoints[0].path)


def _load_tasks(config: CheckpointEvalConfig) -> dict[str, Any]:
    from lighteval_nanotron.pipeline import load_tasks
    from lighteval_nanotron.tasks import get_data_dirs, set_data_dirs

    if config.data_dirs:
        set_data_dirs([*config.data_dirs, *get_data_dirs()])
    return load_tasks(config.tasks, config.custom_tasks, config.fewshot_draws)


def _load_docs(config: CheckpointEvalConfig, tasks: dict[str, Any], world: Any) -> dict[str, Any]:
    """The tasks' docs: datasets and prompts load now, so that a bad task fails before the model is
    built, and on world rank 0 only (broadcast), so that no dataset is opened by every rank."""
    from lighteval_nanotron.pipeline.pipeline import build_docs

    first = dist.get_global_rank(world, 0)
    return computed_once(lambda: build_docs(tasks, config.max_samples), world, src=first)


def plan_evaluation(config: CheckpointEvalConfig, parallel_context: Any) -> EvaluationPlan:
    """Everything that can fail before a model is built, checked on every rank together."""
    world = parallel_context.world_pg
    # Listed on world rank 0 only and broadcast: a folder listed by each rank on its own can change
    # in between (a live run saving a checkpoint), and every rank must work on one list.
    checkpoints = collectively(
        world,
        "listing the checkpoints",
        lambda: computed_once(lambda: _discover(config), world, src=dist.get_global_rank(world, 0)),
    )
    checkpoint_model, model_name = collectively(
        world, "reading the checkpoints", lambda: _read_models(checkpoints, config)
    )
    tasks = collectively(world, "loading the tasks", lambda: _load_tasks(config))
    backfill = config.checkpoints_dir is not None
    done = _done_tasks(config.output_dir, model_name, world) if backfill else {}
    tasks_by_step = pending_tasks(checkpoints, list(tasks), done, config.max_samples)
    todo = [info for info in checkpoints if info.step in tasks_by_step]
    skipped = sorted(info.step for info in checkpoints if info.step not in tasks_by_step)
    if not todo:
        return EvaluationPlan([], skipped, checkpoint_model, model_name, None, None, {})
    tokenizer = collectively(
        world,
        "loading the tokenizer",
        lambda: load_tokenizer(tokenizer_source(config.tokenizer, todo[0].path), config.use_chat_template),
    )
    prompts = collectively(world, "checking the prompt settings", lambda: _prompt_manager(config, tokenizer))
    needed = {name for names in tasks_by_step.values() for name in names}
    tasks = {name: task for name, task in tasks.items() if name in needed}
    docs = collectively(world, "loading the datasets", lambda: _load_docs(config, tasks, world))
    return EvaluationPlan(todo, skipped, checkpoint_model, model_name, tokenizer, prompts, tasks, tasks_by_step, docs)


def _prompt_manager(config: CheckpointEvalConfig, tokenizer: Any) -> Any:
    """Raises `ConfigError` when a chat template is asked of a tokenizer without one."""
    from lighteval_nanotron.tasks import PromptManager

    return PromptManager(config.use_chat_template, tokenizer, config.system_prompt)


class CheckpointEvaluator:
    """The model built once for a layout, the requests prepared once; `evaluate(info)` per checkpoint."""

    def __init__(self, config: CheckpointEvalConfig, parallel_context: Any, setup: EvaluationPlan) -> None:
        from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel

        self.config = config
        self.parallel_context = parallel_context
        self.world = parallel_context.world_pg
        dtype = resolve_dtype(config.dtype, setup.checkpoints[0].path)
        self.dtype_name = str(dtype).removeprefix("torch.")
        architecture = setup.checkpoint_model
        import_nanotron_trainer(with_wandb="wandb" in config.loggers, with_data_libraries=False)  # never trains
        self.model = collectively(
            self.world,
            "building the model",
            lambda: build_nanotron_model(
                architecture.model_config, parallel_context, dtype, carried=architecture.carried, random_init=False
            ),
        )
        engine_config = EngineConfig.for_run(config)
        self.engine = collectively(
            self.world,
            "building the engine",
            lambda: NanotronLightevalModel(
                self.model, parallel_context, setup.tokenizer, engine_config, prompt_fn=setup.prompts.prepare_prompt
            ),
        )
        self.setup = setup
        self.pipelines: dict[tuple[str, ...], Any] = {}
        self.loggers = collectively(self.world, "opening the results loggers", self._build_loggers)

    def pipeline_for(self, step: int | None) -> Any:
        """The pipeline of the tasks still to evaluate at `step`, prepared once per task set."""
        from lighteval_nanotron.pipeline import EvaluationPipeline

        names = tuple(self.setup.tasks_by_step.get(step, list(self.setup.tasks)))
        if names not in self.pipelines:
            self.pipelines[names] = collectively(
                self.world,
                "preparing the requests",
                lambda: EvaluationPipeline.prepare(
                    self.engine,
                    {name: self.setup.tasks[name] for name in names},
                    self.config.max_samples,
                    model_name=self.setup.model_name,
                    docs={name: self.setup.docs[name] for name in names},
                    show_progress=self.config.progress_bar and dist.get_rank(self.world) == 0,
                ),
            )
        return self.pipelines[names]

    def _build_loggers(self) -> Any:
        """The tracking loggers, on the reporting rank only (None elsewhere)."""
        from lighteval_nanotron.tracking import TrackingConfig

        if not self.engine.is_reporting_rank:
            return None
        return TrackingConfig(
            output_dir=self.config.output_dir,
            loggers=list(self.config.loggers),
            tensorboard_prefix=self.config.tensorboard_prefix,
            wandb_project=self.config.wandb_project,
            wandb_entity=self.config.wandb_entity,
        ).build()

    def evaluate(
        self, info: CheckpointInfo, on_result: Callable[[EvaluationResult], None] | None = None
    ) -> EvaluationResult | None:
        """Load `info`'s weights into the model and evaluate; the reporting rank writes the result,
        passes it to `on_result` and returns it."""
        what = f"checkpoint {info.path}"
        pipeline = self.pipeline_for(info.step)
        started = time.perf_counter()
        collectively(
            self.world, f"loading {what}", lambda: load_checkpoint_weights(self.model, self.parallel_context, info.path)
        )
        load_s = time.perf_counter() - started
        return collectively(self.world, f"evaluating {what}", lambda: self._run(pipeline, info, load_s, on_result))

    def _run(
        self,
        pipeline: Any,
        info: CheckpointInfo,
        load_s: float,
        on_result: Callable[[EvaluationResult], None] | None,
    ) -> EvaluationResult | None:
        result = pipeline.run(
            step=info.step, consumed_tokens=info.consumed_tokens, consumed_train_samples=info.consumed_train_samples
        )
        if result is None:
            return None
        result.extra_config.update(
            checkpoint=str(info.path),
            parallelism={"tp": self.config.tp, "pp": self.config.pp, "dp": self.config.dp},
            dtype=self.dtype_name,
            device="cpu" if self.config.cpu else "cuda",
            checkpoint_load_s=load_s,
        )
        self.loggers.log(result)
        if on_result is not None:
            on_result(result)
        raise_for_failed_tasks(result)
        return result

    def close(self) -> None:
        if self.loggers is not None:
            self.loggers.close()
            self.loggers = None


@dataclass
class CheckpointEvalReport:
    """The outcome on this rank: results on the reporting rank (in step order), [] elsewhere."""

    results: list[EvaluationResult]
    skipped_steps: list[int]
    """Steps left out because their results were already in the output folder."""


def evaluate_checkpoints(
    config: CheckpointEvalConfig, on_result: Callable[[EvaluationResult], None] | None = None
) -> CheckpointEvalReport:
    """Evaluate the configured checkpoints at the configured layout. Every rank calls it.
    `on_result` is called on the reporting rank after each checkpoint's results are written."""
    from lighteval_nanotron.parallel.deadline import bounded_collectives

    with (
        parallel_context_for(config.tp, config.pp, config.dp, config.cpu) as parallel_context,
        bounded_collectives(parallel_context, config.failure_timeout_s),
    ):
        setup = plan_evaluation(config, parallel_context)
        results: list[EvaluationResult] = []
        if not setup.checkpoints:
            return CheckpointEvalReport(results, setup.skipped_steps)
        evaluator = CheckpointEvaluator(config, parallel_context, setup)
        try:
            for info in setup.checkpoints:
                result = evaluator.evaluate(info, on_result)
                if result is not None:
                    results.append(result)
        finally:
            evaluator.close()
        return CheckpointEvalReport(results, setup.skipped_steps)
