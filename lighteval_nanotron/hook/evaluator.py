"""The training callback: it decides *when* to evaluate; how (in the loop, or launched) is a part it
holds; the pipeline decides *what*, loggers *where*.

`TrainingEvaluator` has one method per trainer hook (`pre_training`, `post_train_step`,
`post_save_checkpoint`, `post_training`), each taking the trainer, and hands each moment to its
`how`: `InLoop` here (every rank calls every method: evaluation is collective), or
`hook.asynchronous.Launched`. Nothing here touches a parameter, a gradient or the optimizer.
"""

import logging
import time
from collections.abc import Callable
from typing import Any, Optional, Protocol

import torch
import torch.distributed as dist

from lighteval_nanotron.analysis import LiveSignal
from lighteval_nanotron.analysis.report_table import signal_summary
from lighteval_nanotron.console_errors import wants_traceback
from lighteval_nanotron.errors import EvaluationError, LightevalNanotronError
from lighteval_nanotron.hook.schedule import EvalSchedule, Moment
from lighteval_nanotron.hook.state_guard import preserve_training_state
from lighteval_nanotron.hook.step_times import StepTimes
from lighteval_nanotron.hook.trainer_state import consumed_train_samples, start_step
from lighteval_nanotron.nanotron_compat.console import is_verbose
from lighteval_nanotron.options.hook import EvaluationConfig
from lighteval_nanotron.parallel.agreement import Verdict, agree, collectively
from lighteval_nanotron.parallel.deadline import bounded_collectives, is_timeout
from lighteval_nanotron.pipeline import EvaluationPipeline
from lighteval_nanotron.setup.finished_steps import finished_steps, finished_tasks_by_step
from lighteval_nanotron.setup.step import StepEvaluator
from lighteval_nanotron.tracking import LoggerContainer
from lighteval_nanotron.tracking.log_table import format_cost_table, format_results_line, format_results_table
from lighteval_nanotron.tracking.scalars import COST_TRAIN_STEPS_KEY

_TIMEOUT_HINT = "Raise lighteval_nanotron.failure_timeout_s if evaluation is just slow."

logger = logging.getLogger(__name__)


def consumed_samples(trainer: Any, moment: Moment) -> int:
    """Samples trained on so far. In `post_train_step` the trainer has not yet counted the step."""
    samples = consumed_train_samples(trainer)
    if moment is Moment.STEP:
        samples += trainer.global_batch_size
    return int(samples)


def consumed_tokens(trainer: Any, moment: Moment) -> int:
    return consumed_samples(trainer, moment) * int(trainer.config.tokens.sequence_length)


class Evaluations(Protocol):
    """How a wanted moment is evaluated: `InLoop`, or `hook.asynchronous.Launched`."""

    def setup(self, trainer: Any) -> None: ...

    def at(self, trainer: Any, moment: Moment) -> None: ...

    def close(self) -> None: ...


class TrainingEvaluator:
    """The training callback: decides *when* (its schedule) and hands each wanted moment to `how`
    (`InLoop`: evaluate the live model now; `hook.asynchronous.Launched`: launch an `eval` of the
    checkpoint). Holds what a run reports, whichever evaluates."""

    def __init__(
        self, config: EvaluationConfig, how: Optional[Callable[["TrainingEvaluator"], Evaluations]] = None
    ) -> None:
        self.config = config
        self.schedule = EvalSchedule.from_config(config)
        self.model_name: Optional[str] = None
        self.evaluated: list[int] = []
        """Steps evaluated successfully by this run, in order (the same list on every rank)."""
        self.done_steps: set[int] = set()
        """Steps whose results were already written for every task (by an earlier run): skipped."""
        self.failures: list[tuple[int, str]] = []
        """(step, description) of every evaluation that failed, in order (the same on every rank)."""
        self.last_results: dict = {}
        """`{task: {metric: value}}` of the last successful evaluation, on every rank."""
        self.loss_log: Any = None
        """Where the training loss goes on the reporting rank (`tracking.training_loss`), if anywhere."""
        self.wandb_run: Any = None
        """The W&B run `hook.wandb_run` opened for this training run (finished in `close`), if any."""
        self.step_times = StepTimes()
        self.last_costs: dict = {}
        """`{task: cost}` (`EvaluationResult.task_costs`) of the last successful evaluation, on every rank."""
        self.last_signal: dict = {}
        """The signal section of the last successful evaluation (`EvaluationResult.signal`), on every rank."""
        self.how: Evaluations = (how or InLoop)(self)
        """How a wanted step is evaluated: `setup(trainer)`, `at(trainer, moment)`, `close()`."""

    @property
    def pipeline(self) -> Any:
        """The in-loop evaluation's `EvaluationPipeline` (None before setup, and when launching)."""
        return getattr(self.how, "pipeline", None)

    @property
    def launches(self) -> list:
        """Every launched evaluation so far (`LaunchRecord`, launching rank), [] in the loop."""
        return getattr(self.how, "launches", [])

    # Trainer hooks -----------------------------------------------------------------------------

    def pre_training(self, trainer: Any) -> None:
        """Prepare (`how.setup`: tasks, datasets, prompts and tokens, or the launcher); fail on every
        rank together if anything is bad."""
        self.how.setup(trainer)
        self.how.at(trainer, Moment.START)

    def post_train_step(self, trainer: Any) -> None:
        self.step_times.record(trainer)
        try:
            self.how.at(trainer, Moment.STEP)
        finally:
            self.step_times.step_ended()

    def post_save_checkpoint(self, trainer: Any) -> None:
        try:
            self.how.at(trainer, Moment.CHECKPOINT)
        finally:
            self.step_times.step_ended()

    def train_step_logs(self, trainer: Any, loss_avg: Any) -> None:
        """Record the loss Nanotron just logged (reporting rank; it is on the output stage)."""
        if self.loss_log is None or not isinstance(loss_avg, torch.Tensor):
            return
        tokens = int(consumed_train_samples(trainer) * trainer.config.tokens.sequence_length)
        self.loss_log.append(int(trainer.iteration_step), tokens, float(loss_avg.item()))

    def post_training(self, trainer: Any) -> None:
        try:
            self.how.at(trainer, Moment.END)
        finally:
            self.close()

    def close(self) -> None:
        try:
            self.how.close()
        finally:
            if self.wandb_run is not None:
                self.wandb_run.finish()
                self.wandb_run = None


def agreed_setup(world: Any, fn: Callable[[], Any]) -> Any:
    """`fn()` on every rank, then agree; if it raised anywhere, every rank raises the setup error."""
    return collectively(world, "lighteval_nanotron setup", fn, timeout_hint=_TIMEOUT_HINT, failure=_setup_failure)


class InLoop:
    """Evaluates the live model in the training loop, through the step path (`setup.step`)."""

    def __init__(self, run: TrainingEvaluator) -> None:
        self.run = run
        self.pipeline: Optional[EvaluationPipeline] = None
        self.step: Optional[StepEvaluator] = None
        """The `setup.step.StepEvaluator` of the prepared pipeline (set up in `setup`)."""
        self.loggers: Optional[LoggerContainer] = None
        self.signal: Optional[LiveSignal] = None
        """The run's signal analysis (`analysis.LiveSignal`), on the reporting rank."""

    # Setup ---------------------------------------------------------------------------------------

    def setup(self, trainer: Any) -> None:
        """Through `lighteval_nanotron.setup`, as `eval` does: tokenizer, engine and tasks; prompts,
        tokens and batch plans; loggers and the steps already evaluated. Each phase is agreed on."""
        from lighteval_nanotron.setup.engine import training_engine
        from lighteval_nanotron.setup.loggers import open_loggers
        from lighteval_nanotron.setup.naming import model_name
        from lighteval_nanotron.setup.tasks import load_tasks, prepare_pipeline

        world = trainer.parallel_context.world_pg
        general = trainer.config.general
        self.run.model_name = model_name(self.run.config.model_name, general.project, general.run, fallback="nanotron")
        started = time.perf_counter()

        def engine_and_tasks() -> tuple[Any, dict]:
            engine = training_engine(trainer.config, trainer.model, trainer.parallel_context, self.run.config)
            return engine, load_tasks(self.run.config)

        def open_outputs() -> None:
            self.loggers = open_loggers(self.pipeline.model, self.run.config, self.run.wandb_run)
            if self.loggers is not None:  # the reporting rank
                self.signal = LiveSignal(self.run.config.output_dir, self.run.model_name)
            if self.loggers is not None and "json" in self.run.config.loggers:
                from lighteval_nanotron.tracking.training_loss import TrainingLossLog

                self.run.loss_log = TrainingLossLog(self.run.config.output_dir, self.run.model_name)

        with bounded_collectives(trainer.parallel_context, self.run.config.failure_timeout_s):
            # Agreed phases: the second has collectives (datasets loaded once, broadcast), so every
            # rank must have got through the first (tokenizer, tasks) before any rank enters it.
            engine, tasks = agreed_setup(world, engine_and_tasks)
            length = int(trainer.config.tokens.sequence_length)
            progress_log = _progress_line if "log" in self.run.config.loggers else None
            self.pipeline = agreed_setup(
                world,
                lambda: prepare_pipeline(
                    engine,
                    tasks,
                    self.run.config,
                    self.run.model_name,
                    sequence_length=length,
                    progress_log=progress_log,
                ),
            )
            agreed_setup(world, open_outputs)
            self.step = StepEvaluator(
                self.pipeline, self.run.config, trainer.model, trainer.parallel_context, self.loggers, self.signal
            )
            done = finished_tasks_by_step(self.run.config.output_dir, self.run.model_name, world, self.step.identity)
        pipeline = self.pipeline
        self.run.done_steps = finished_steps(done, pipeline.result_names, pipeline.max_samples, pipeline.digests)
        _log_rank0(
            world,
            logging.INFO,
            f"[lighteval_nanotron] prepared {', '.join(self.pipeline.result_names)} "
            f"in {time.perf_counter() - started:.1f}s; "
            f"evaluating at {self._plan_description(trainer)}",
        )

    def _remaining_steps(self, trainer: Any) -> list[int]:
        checkpoints = trainer.config.checkpoints
        steps = self.run.schedule.planned_steps(
            start_step(trainer),
            trainer.config.tokens.train_steps,
            checkpoints.checkpoint_interval if checkpoints is not None else None,
        )
        return [step for step in steps if step not in self.run.schedule.seen_steps | self.run.done_steps]

    def _plan_description(self, trainer: Any) -> str:
        skipped = sorted(self.run.done_steps)
        todo = self._remaining_steps(trainer)
        text = f"steps {todo}" if todo else "no remaining step"
        return text + (f" (already evaluated: {skipped})" if skipped else "")

    # Evaluation ------------------------------------------------------------------------------------

    def at(self, trainer: Any, moment: Moment) -> None:
        """Evaluate now if the schedule wants this moment's step (a step done before: check it is this run's)."""
        step = int(trainer.iteration_step)
        if self.pipeline is None or not self.run.schedule.wants(moment, step):
            return
        self.run.schedule.mark(step)
        if step in self.run.done_steps:
            self.check_done(trainer, step)
        else:
            self.evaluate(trainer, step, consumed_tokens(trainer, moment), consumed_samples(trainer, moment))

    def check_done(self, trainer: Any, step: int) -> None:
        """A step already evaluated is skipped, once its results are known to be this run's model's:
        the same weights (another run under this model name is not) and settings (collective)."""
        world = trainer.parallel_context.world_pg
        error: Optional[BaseException] = None
        with bounded_collectives(trainer.parallel_context, self.run.config.failure_timeout_s):
            try:
                self.step.check_done(step)
            except Exception as caught:  # noqa: BLE001 - agreed on below, so that no rank hangs
                error = caught
            if error is not None and is_timeout(error):
                raise _stalled_peer_error(step, self.run.config.failure_timeout_s) from error
            verdict = agree(error, world, self.run.config.failure_timeout_s, f"step {step}", timeout_hint=_TIMEOUT_HINT)
        if verdict.failed:
            self._fail(world, step, 0.0, verdict, error)

    def evaluate(self, trainer: Any, step: int, tokens: int, samples: Optional[int] = None) -> None:
        """Evaluate now (collective), write the results, agree on the outcome; raise only if asked to."""
        world = trainer.parallel_context.world_pg
        started = time.perf_counter()
        error: Optional[BaseException] = None
        result = None
        with bounded_collectives(trainer.parallel_context, self.run.config.failure_timeout_s):
            try:
                result = self.step.evaluate(
                    step,
                    tokens,
                    samples,
                    record=self._cost_in_steps,
                    guard=lambda: preserve_training_state(trainer.model, getattr(trainer, "random_states", None)),
                )
            except Exception as caught:  # noqa: BLE001 - agreed on below, so that no rank hangs
                error = caught
                # this library's errors are said in the agreed verdict; a traceback only for anything else
                traceback = caught if not isinstance(caught, LightevalNanotronError) or wants_traceback() else None
                logger.log(
                    logging.ERROR if traceback else logging.DEBUG,
                    "[lighteval_nanotron] evaluation at step %d raised on this rank",
                    step,
                    exc_info=traceback,
                )
            if error is not None and is_timeout(error):
                raise _stalled_peer_error(step, self.run.config.failure_timeout_s) from error
            verdict = agree(
                error,
                world,
                self.run.config.failure_timeout_s,
                f"evaluation at step {step}",
                timeout_hint=_TIMEOUT_HINT,
            )
        wall = time.perf_counter() - started
        if verdict.failed:
            self._fail(world, step, wall, verdict, error)
            return
        self.run.evaluated.append(step)
        self.run.last_results, self.run.last_costs, self.run.last_signal = _share_results(result, self.pipeline.model)
        if "log" in self.run.config.loggers:
            in_steps = self.run.step_times.in_steps(wall)
            cost = "" if in_steps is None else f" = {in_steps:.1f} training steps"
            header = f"[lighteval_nanotron] step {step} ({tokens} tokens), {wall:.1f}s{cost}:"
            if is_verbose():  # the full tables; else one line, the results files hold everything
                table = format_results_table(self.run.last_results)
                if self.run.last_costs:
                    table += "\n\n" + format_cost_table(self.run.last_costs)
                summary = signal_summary(self.run.last_signal)
                if summary:
                    table += "\n\nSignal across the run (docs/signal.md):\n" + summary
                _log_rank0(world, logging.INFO, f"{header}\n{table}")
            else:
                _log_rank0(world, logging.INFO, f"{header} {format_results_line(self.run.last_results)}")

    def _cost_in_steps(self, result: Any) -> dict[str, float]:
        """The evaluation's seconds over the mean training step (scalar, JSON)."""
        mean = self.run.step_times.mean_s
        return {"mean_train_step_s": mean, COST_TRAIN_STEPS_KEY: result.wall_time_s / mean} if mean else {}

    def _fail(self, world: Any, step: int, wall: float, verdict: Verdict, error: Optional[BaseException]) -> None:
        self.run.failures.append((step, verdict.describe()))
        action = "stopping training (stop_on_failure)" if self.run.config.stop_on_failure else "training continues"
        message = (
            f"[lighteval_nanotron] evaluation at step {step} FAILED after {wall:.1f}s, {action}: {verdict.describe()}"
        )
        _log_rank0(world, logging.ERROR, message)
        if self.run.config.stop_on_failure:
            fix = ". Set lighteval_nanotron.stop_on_failure: false to keep training."
            raise EvaluationError(message + fix) from error

    def close(self) -> None:
        if self.loggers is not None:
            self.loggers.close()
            self.loggers = None


def _share_results(result: Any, engine: Any) -> tuple[dict, dict, dict]:
    """The reporting rank's `{task: {metric: value}}`, `{task: cost}` and signal section, on every
    rank (for the log and callers)."""
    return engine.computed_once(lambda: (result.results, result.task_costs, result.signal))


def _stalled_peer_error(step: int, timeout_s: float) -> EvaluationError:
    return EvaluationError(
        f"[lighteval_nanotron] evaluation at step {step}: a peer rank did not answer within failure_timeout_s="
        f"{timeout_s}s; it is stalled or dead. The process group cannot be used after that (gloo and NCCL "
        "abort it), so training stops whatever stop_on_failure says. Look at that rank's logs; raise "
        "lighteval_nanotron.failure_timeout_s if evaluation was only slow."
    )


def _setup_failure(what: str, verdict: Verdict, error: Optional[BaseException]) -> EvaluationError:
    return EvaluationError(
        f"lighteval_nanotron could not prepare its evaluation, so training does not start: {verdict.describe()}. "
        "Fix the lighteval_nanotron section (tasks, custom_tasks, data_dirs, max_samples) or remove it."
    )


def _progress_line(line: str) -> None:
    """A progress line of the running evaluation into the training log (the reporting rank's)."""
    logger.info("[lighteval_nanotron] %s", line)


def _log_rank0(world: dist.ProcessGroup, level: int, message: str) -> None:
    if dist.get_rank(world) == 0:
        logger.log(level, message)
