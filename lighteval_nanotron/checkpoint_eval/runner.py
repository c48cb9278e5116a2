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

import dataclasses
import logging
import sys
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
from lighteval_nanotron.checkpoint_eval.loading import check_same_model, resolve_dtype, tokenizer_source
from lighteval_nanotron.checkpoint_eval.mesh_setup import collectively, parallel_context_for
from lighteval_nanotron.checkpoints.format import CheckpointModel, read_checkpoint_model, read_training_config
from lighteval_nanotron.checkpoints.nanotron_builder import (
    build_nanotron_model,
    check_model_layout,
    load_checkpoint_weights,
)
from lighteval_nanotron.heldout import build_held_out_set
from lighteval_nanotron.models.families import family_of_config
from lighteval_nanotron.nanotron_compat.imports import import_nanotron_trainer
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
from lighteval_nanotron.parallel.once import computed_once
from lighteval_nanotron.pipeline.pipeline import build_docs
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.requests.doc import docs_digest
from lighteval_nanotron.requests.held_out import HeldOutSet, window_digests
from lighteval_nanotron.setup.finished_steps import finished_tasks_by_step
from lighteval_nanotron.setup.step import StepEvaluator, run_identity
from lighteval_nanotron.setup.tasks import load_tasks, prepare_pipeline, result_names

logger = logging.getLogger(__name__)


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
    sequence_length: int | None = None
    """The first checkpoint's training `tokens.sequence_length` (the held-out windows' default length)."""
    held_out: list[HeldOutSet] = field(default_factory=list)
    """Every held-out domain's `HeldOutSet`, built on world rank 0 and broadcast before the steps
    are planned: a step is done for a domain only on these windows (their digests)."""

    dtype: str | None = None
    """The dtype the model is built in (`--dtype`, else the checkpoint's)."""

    @property
    def digests(self) -> dict[str, str]:
        """`{results key: digest}` of every task's docs and held-out domain's windows."""
        return {**{name: docs_digest(docs.docs) for name, docs in self.docs.items()}, **window_digests(self.held_out)}

    def identity(self, config: CheckpointEvalConfig) -> dict[str, Any]:
        """The identity of this evaluation's steps, as far as it is known before a model is built
        (`setup.step.run_identity`: no decoding settings, no weights)."""
        from lighteval_nanotron.setup.engine import engine_config

        return run_identity(config, engine_config(config), self.prompts.settings(), self.dtype)


def _discover(config: CheckpointEvalConfig) -> list[CheckpointInfo]:
    if config.checkpoints_dir is not None:
        return find_checkpoints(config.checkpoints_dir)
    return [checkpoint_info(config.checkpoint)]


def read_models(checkpoints: list[CheckpointInfo], config: CheckpointEvalConfig) -> tuple[CheckpointModel, str]:
    checkpoint_model = read_checkpoint_model(checkpoints[0].path)
    for info in checkpoints[1:]:
        check_same_model(checkpoint_model, read_checkpoint_model(info.path), info.path)
    check_model_layout(checkpoint_model.model_config, config.tp, config.pp)
    resolve_dtype(config.dtype, checkpoints[0].path)
    return checkpoint_model, config.model_name or default_model_name(checkpoints[0].path)


def _load_docs(config: CheckpointEvalConfig, tasks: dict[str, Any], world: Any) -> dict[str, Any]:
    """The tasks' docs: datasets and prompts load now, so that a bad task fails before the model is
    built, and on world rank 0 only (broadcast), so that no dataset is opened by every rank."""
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
        world, "reading the checkpoints", lambda: read_models(checkpoints, config)
    )
    tasks = collectively(world, "loading the tasks", lambda: load_tasks(config))
    plan = with_inputs(config, world, EvaluationPlan(checkpoints, [], checkpoint_model, model_name, None, None, tasks))
    backfill = config.checkpoints_dir is not None
    done = finished_tasks_by_step(config.output_dir, model_name, world, plan.identity(config)) if backfill else {}
    tasks_by_step = pending_tasks(checkpoints, result_names(config, tasks), done, config.max_samples, plan.digests)
    todo = [info for info in checkpoints if info.step in tasks_by_step]
    skipped = sorted(info.step for info in checkpoints if info.step not in tasks_by_step)
    return dataclasses.replace(plan, checkpoints=todo, skipped_steps=skipped, tasks_by_step=tasks_by_step)


def with_inputs(config: CheckpointEvalConfig, world: Any, plan: EvaluationPlan) -> EvaluationPlan:
    """`plan` with its tokenizer, prompt settings and dtype, every held-out domain (checked against
    the checkpoint's model as the engine checks them: its vocabulary and positions) and every task's
    docs: their digests decide whether a step is done."""
    from lighteval_nanotron.setup.engine import engine_config, prompt_manager
    from lighteval_nanotron.setup.tokenizer import load_tokenizer

    path = plan.checkpoints[0].path
    tokenizer = collectively(
        world,
        "loading the tokenizer",
        lambda: load_tokenizer(tokenizer_source(config.tokenizer, path), config.use_chat_template),
    )
    prompts = collectively(world, "checking the prompt settings", lambda: prompt_manager(config, tokenizer))
    sequence_length = (read_training_config(path).get("tokens") or {}).get("sequence_length")
    dtype = str(resolve_dtype(config.dtype, path)).removeprefix("torch.")
    model_config = plan.checkpoint_model.model_config
    positions = engine_config(config).max_length or family_of_config(model_config).max_positions(model_config)
    length = config.held_out_sequence_length or sequence_length or positions
    vocab_size = int(model_config.vocab_size)

    def build() -> list[HeldOutSet]:
        return [build_held_out_set(s, tokenizer, length, vocab_size, positions) for s in config.held_out_specs]

    first = dist.get_global_rank(world, 0)
    held_out = collectively(world, "preparing the held-out domains", lambda: computed_once(build, world, src=first))
    docs = collectively(world, "loading the datasets", lambda: _load_docs(config, plan.tasks, world))
    return dataclasses.replace(
        plan, tokenizer=tokenizer, prompts=prompts, sequence_length=sequence_length, held_out=held_out, docs=docs,
        dtype=dtype,
    )  # fmt: skip


class CheckpointEvaluator:
    """The model built once for a layout, the requests prepared once; `evaluate(info)` per checkpoint.

    The reporting rank adds to each result of a training step the signal across the run, from the
    run's results in the output folder and the evaluations since, as the training hook does
    (`analysis.LiveSignal`)."""

    def __init__(self, config: CheckpointEvalConfig, parallel_context: Any, setup: EvaluationPlan) -> None:
        from lighteval_nanotron.setup.engine import build_engine

        self.config = config
        self.parallel_context = parallel_context
        self.world = parallel_context.world_pg
        dtype = resolve_dtype(config.dtype, setup.checkpoints[0].path)
        architecture = setup.checkpoint_model
        import_nanotron_trainer(with_wandb="wandb" in config.loggers, with_data_libraries=False)  # never trains
        self.model = collectively(
            self.world,
            "building the model",
            lambda: build_nanotron_model(
                architecture.model_config, parallel_context, dtype, carried=architecture.carried, random_init=False
            ),
        )
        self.engine = collectively(
            self.world,
            "building the engine",
            lambda: build_engine(self.model, parallel_context, setup.tokenizer, config, setup.prompts),
        )
        self.setup = setup
        self.steps: dict[tuple[str, ...], StepEvaluator] = {}
        self.loggers = collectively(self.world, "opening the results loggers", self._build_loggers)
        self.signal = collectively(self.world, "reading the run's results so far", self._open_signal)
        """The run's signal analysis (`analysis.LiveSignal`) on the reporting rank, None elsewhere."""

    def step_for(self, step: int | None) -> StepEvaluator:
        """The step path (`setup.step`) of the tasks still to evaluate at `step`, its pipeline
        prepared once per task set."""
        names = tuple(self.setup.tasks_by_step.get(step, result_names(self.config, self.setup.tasks)))
        tasks = [name for name in names if name in self.setup.tasks]
        if names not in self.steps:
            pipeline = collectively(
                self.world,
                "preparing the requests",
                lambda: prepare_pipeline(
                    self.engine,
                    {name: self.setup.tasks[name] for name in tasks},
                    self.config,
                    self.setup.model_name,
                    docs={name: self.setup.docs[name] for name in tasks},
                    sequence_length=self.setup.sequence_length,
                    held_out=[held_out for held_out in self.setup.held_out if held_out.key in names],
                    progress_log=None if sys.stderr.isatty() else _progress_line,
                ),
            )
            self.steps[names] = StepEvaluator(
                pipeline, self.config, self.model, self.parallel_context, self.loggers, self.signal
            )
        return self.steps[names]

    def _build_loggers(self) -> Any:
        """The tracking loggers, on the reporting rank only (None elsewhere)."""
        from lighteval_nanotron.setup.loggers import open_loggers

        return open_loggers(self.engine, self.config)

    def _open_signal(self) -> Any:
        """The run's results already written, then each new one (reporting rank; None elsewhere)."""
        if self.loggers is None:
            return None
        from lighteval_nanotron.analysis import LiveSignal

        return LiveSignal(self.config.output_dir, self.setup.model_name)

    def evaluate(
        self, info: CheckpointInfo, on_result: Callable[[EvaluationResult], None] | None = None
    ) -> EvaluationResult | None:
        """Load `info`'s weights into the model and evaluate (`setup.step`); the reporting rank
        writes the result, passes it to `on_result` and returns it."""
        what = f"checkpoint {info.path}"
        step = self.step_for(info.step)
        step.check(info.step)  # before the load: a refused setting costs no load
        started = time.perf_counter()
        collectively(
            self.world, f"loading {what}", lambda: load_checkpoint_weights(self.model, self.parallel_context, info.path)
        )
        load_s = time.perf_counter() - started

        def record(result: EvaluationResult) -> dict[str, Any]:
            return {
                "checkpoint": str(info.path),
                "parallelism": {"tp": self.config.tp, "pp": self.config.pp, "dp": self.config.dp},
                "device": "cpu" if self.config.cpu else "cuda",
                "checkpoint_load_s": load_s,
            }

        return collectively(
            self.world,
            f"evaluating {what}",
            lambda: step.evaluate(
                info.step, info.consumed_tokens, info.consumed_train_samples, record=record, on_result=on_result
            ),
        )

    def close(self) -> None:
        if self.loggers is not None:
            self.loggers.close()
            self.loggers = None


def _progress_line(line: str) -> None:
    """A progress line on stderr, where no bar is drawn (a log file, a Slurm job's output)."""
    print(line, file=sys.stderr, flush=True)


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
