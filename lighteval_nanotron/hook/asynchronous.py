"""The hook's asynchronous mode: each saved checkpoint is evaluated by a launched `eval` process
(local or Slurm, `launch`), while training goes on.

The hook decides *when*: a checkpoint is wanted when `eval_at_checkpoints` is set, when its step is
a multiple of `eval_interval` (re-read from `eval_interval_file` at each save), or when it is the
training's last step and `eval_at_end` is set. A resumed training queues again, at setup, the
checkpoints up to the step it resumes from that the earlier run queued and never launched (it ended
first: they were lost with it); one launched before and without results is named in the log instead
(it may still be running). Only the launching rank (Nanotron's logging rank, DP0/TP0 of the last
stage, where the W&B run and the loss log live) acts: it queues the checkpoint at
`post_save_checkpoint` and launches at the next hook call (`post_train_step` or `post_training`),
after every save of that step is done. No collective runs after setup, so the training's process
groups never wait for an evaluation; a failed or lost evaluation is recorded (`failures`, the log)
and never stops training. At the end, local evaluations are waited for (the queued ones launched as
slots free); Slurm jobs are submitted and left to the batch system.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Optional

import torch.distributed as dist

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.evaluator import TrainingEvaluator, agreed_setup
from lighteval_nanotron.hook.schedule import Moment
from lighteval_nanotron.hook.trainer_state import start_step
from lighteval_nanotron.launch.job import EvalJob, build_job
from lighteval_nanotron.launch.launchers import LAUNCHED, QUEUED, launch_history, launcher_for
from lighteval_nanotron.launch.queue import LaunchQueue, LaunchRecord
from lighteval_nanotron.options.hook import EvaluationConfig
from lighteval_nanotron.parallel.deadline import bounded_collectives
from lighteval_nanotron.setup.engine import engine_config
from lighteval_nanotron.setup.finished_steps import finished_steps
from lighteval_nanotron.setup.naming import model_name
from lighteval_nanotron.setup.step import run_identity
from lighteval_nanotron.steps import numbered_folders, step_number
from lighteval_nanotron.tracking.log_table import format_results_table
from lighteval_nanotron.tracking.paths import evaluated_tasks_by_step, results_file_content, step_results_file
from lighteval_nanotron.tracking.results_file import evaluated_tasks

logger = logging.getLogger(__name__)


class Launched:
    """Launches the evaluation of each wanted checkpoint (an `eval` job) instead of evaluating in
    the loop. `launches` is kept on the launching rank (empty elsewhere), as the run's `evaluated`
    and `failures`."""

    def __init__(self, run: TrainingEvaluator) -> None:
        self.run = run
        self.settings = run.config.asynchronous
        self.eval_interval = run.config.eval_interval
        self.queue: Optional[LaunchQueue] = None
        """On the launching rank only."""
        self.task_names: list[str] = []
        self.identity: dict[str, Any] = {}
        """The identity the launched evaluations record, as far as the options give it (no tokenizer,
        dtype or weights here): results of another are not this run's."""

    @property
    def launches(self) -> list[LaunchRecord]:
        """Every launched evaluation so far, in launch order (launching rank)."""
        return list(self.queue.records) if self.queue is not None else []

    def at(self, trainer: Any, moment: Moment) -> None:
        """After a step: launch what is queued (in the background); after a save: queue the
        checkpoint if wanted; at the end: wait for local evaluations, submit Slurm's."""
        if self.queue is None:
            return
        if moment is Moment.STEP:
            self.queue.pump_in_background()  # sbatch, scontrol and the output folder off the training's thread
        elif moment is Moment.CHECKPOINT:
            self._queue_checkpoint(trainer)
        elif moment is Moment.END:
            self._finish()

    def _queue_checkpoint(self, trainer: Any) -> None:
        step = int(trainer.iteration_step)
        if step < 1:
            return
        if self.run.config.eval_interval_file is not None:
            self._read_interval_file(trainer.config.checkpoints.checkpoint_interval)
        if self._wanted(step, int(trainer.config.tokens.train_steps)) and step not in self.run.schedule.seen_steps:
            self.run.schedule.mark(step)
            self.queue.add(self._job(trainer, step))

    def close(self) -> None:
        """Nothing to close: the launched evaluations write their own results."""

    # Setup ---------------------------------------------------------------------------------------

    def setup(self, trainer: Any) -> None:
        world = trainer.parallel_context.world_pg
        general = trainer.config.general
        self.run.model_name = model_name(self.run.config.model_name, general.project, general.run, fallback="nanotron")
        launching = dist.get_rank(world) == int(trainer.logger_ranks[0])

        def prepare() -> None:
            if launching:
                self._prepare(trainer)

        with bounded_collectives(trainer.parallel_context, self.run.config.failure_timeout_s):
            agreed_setup(world, prepare)
        if launching:
            logger.info(
                "[lighteval_nanotron] asynchronous evaluation (%s launcher, tp=%d pp=%d dp=%d%s, at most %d in "
                "flight) of %s; already evaluated: %s",
                self.settings.launcher,
                self.settings.tp,
                self.settings.pp,
                self.settings.dp,
                ", cpu" if self.settings.cpu else "",
                self.settings.max_in_flight,
                self._plan_description(trainer),
                sorted(self.run.done_steps) or "none",  # not the steps queued again (`_queue_earlier_checkpoints`)
            )

    def _prepare(self, trainer: Any) -> None:
        """On the launching rank: the tasks resolve, the launcher can run, the script renders; then
        the loss log, the steps already evaluated and the queue."""
        from lighteval_nanotron.setup.tasks import load_tasks, result_names

        self.task_names = result_names(self.run.config, load_tasks(self.run.config))
        self.identity = run_identity(self.run.config, engine_config(self.run.config), {}, None)
        probe = self._job(trainer, 0)
        if self.settings.launcher == "slurm" and shutil.which("sbatch", path=probe.base_env.get("PATH")) is None:
            raise ConfigError(
                "lighteval_nanotron.asynchronous.launcher is slurm but `sbatch` is not on the PATH: run the training "
                "where Slurm's commands are, or use launcher: local."
            )
        launcher = launcher_for(self.settings)
        launcher.script(probe)  # a bad template fails now, not at the first checkpoint
        if "json" in self.run.config.loggers:
            from lighteval_nanotron.tracking.training_loss import TrainingLossLog

            self.run.loss_log = TrainingLossLog(self.run.config.output_dir, self.run.model_name)
        self.run.done_steps = self._finished_steps()
        for step in self.run.done_steps:
            self.run.schedule.mark(step)
        self.queue = LaunchQueue(
            launcher, self.settings.max_in_flight, self.settings.status_interval_s, self._has_results, self._record
        )
        self._queue_earlier_checkpoints(trainer)

    def _queue_earlier_checkpoints(self, trainer: Any) -> None:
        """A resumed training's checkpoints up to its start step without results: queued again when the
        earlier run queued them and ended before launching them, named in the log when it launched
        them (running still, or failed: never twice at once)."""
        start = self._start_step(trainer)
        for step, _ in numbered_folders(Path(trainer.config.checkpoints.checkpoints_path)):
            if not 1 <= step <= start or step in self.run.schedule.seen_steps:
                continue
            job = self._job(trainer, step)
            history = launch_history(job)
            if history == QUEUED:
                logger.warning(
                    "[lighteval_nanotron] step %d: queued before this run resumed, never launched: queued again", step
                )
                self.run.schedule.mark(step)
                self.queue.add(job)
            elif history == LAUNCHED:
                logger.warning(
                    "[lighteval_nanotron] step %d: launched before this run resumed and without results yet (still "
                    "running, or failed: see %s); not launched again; `eval --checkpoints-dir` evaluates it if needed",
                    step,
                    job.logs_dir,
                )

    def _plan_description(self, trainer: Any) -> str:
        checkpoints = trainer.config.checkpoints
        interval = int(checkpoints.checkpoint_interval)
        train_steps = int(trainer.config.tokens.train_steps)
        first = (int(self._start_step(trainer)) // interval + 1) * interval
        steps = [s for s in range(first, train_steps + 1, interval) if self._wanted(s, train_steps)]
        text = f"the checkpoints at steps {steps}" if steps else "no checkpoint"
        if (
            self.run.config.eval_at_end
            and train_steps % interval
            and not getattr(checkpoints, "save_final_state", False)
        ):
            text += f" (step {train_steps} has no checkpoint: eval_at_end cannot evaluate it)"
        return text

    @staticmethod
    def _start_step(trainer: Any) -> int:
        return start_step(trainer)

    # Decisions -------------------------------------------------------------------------------------

    def _wanted(self, step: int, train_steps: int) -> bool:
        return bool(
            self.run.config.eval_at_checkpoints
            or (self.eval_interval is not None and step % self.eval_interval == 0)
            or (self.run.config.eval_at_end and step == train_steps)
        )

    def _read_interval_file(self, checkpoint_interval: int) -> None:
        """A new `eval_interval` from `eval_interval_file`, when it holds a valid one."""
        path = Path(self.run.config.eval_interval_file)
        if not path.is_file():
            return
        try:
            text = path.read_text().strip()
        except (OSError, ValueError) as error:
            logger.warning(
                "[lighteval_nanotron] eval_interval_file %s unreadable (%s): keeping %s",
                path,
                error,
                self.eval_interval,
            )
            return
        value = step_number(text)  # digits 0-9 only: int() read `1_0` as 10 and `٣` as 3
        if value is None:
            logger.warning(
                "[lighteval_nanotron] eval_interval_file %s says %r, not a number of steps (digits 0-9): keeping %s",
                path,
                text,
                self.eval_interval,
            )
            return
        if value == self.eval_interval:
            return
        if value < 1 or value % checkpoint_interval:
            logger.warning(
                "[lighteval_nanotron] eval_interval_file %s says %d, not a positive multiple of "
                "checkpoint_interval=%d: keeping eval_interval=%s",
                path,
                value,
                checkpoint_interval,
                self.eval_interval,
            )
            return
        logger.warning("[lighteval_nanotron] eval_interval %s -> %d (from %s)", self.eval_interval, value, path)
        self.eval_interval = value

    def _job(self, trainer: Any, step: int) -> EvalJob:
        checkpoint = Path(trainer.config.checkpoints.checkpoints_path).resolve() / str(step)
        tokenizer_args = trainer.config.tokenizer
        name = tokenizer_args.tokenizer_name_or_path if tokenizer_args is not None else None
        tokenizer = str(name) if name else None
        return build_job(
            self.run.config, self.settings, step, checkpoint, self.run.model_name, tokenizer, self._wandb_options(step)
        )

    def _wandb_options(self, step: int) -> dict[str, str]:
        """The evaluation's W&B run: its own, in the training run's group, named and identified after it."""
        run = self.run.wandb_run
        if run is None:
            return {}
        return {
            "wandb_project": str(run.project),
            "wandb_group": str(run.group),
            "wandb_run_name": f"{run.name}-eval-{step}",
            "wandb_run_id": f"{run.id}-eval-{step}",
        }

    # Outcomes --------------------------------------------------------------------------------------

    def _finished_steps(self) -> set[int]:
        """Steps whose results file holds every task and held-out domain (this rank reads the output
        folder: shared with the evaluations it launches). On whatever windows a domain was scored:
        the training processes never build the domains (each launched evaluation does)."""
        done = evaluated_tasks_by_step(self.run.config.output_dir, self.run.model_name, self.identity)
        return finished_steps(done, self.task_names, self.run.config.max_samples, {})

    def _has_results(self, step: int) -> bool:
        """Whether `step`'s results file holds every task and domain (`_finished_steps`, reading only
        that step's file: an evaluation ends at every poll, and the folder holds every earlier step)."""
        path = step_results_file(self.run.config.output_dir, self.run.model_name, step)
        content = results_file_content(path)[0] if path is not None else None
        done = {step: evaluated_tasks(content, self.identity)} if content is not None else {}
        return step in finished_steps(done, self.task_names, self.run.config.max_samples, {})

    def _record(self, record: LaunchRecord) -> None:
        took = f" {record.finished_at - record.launched_at:.1f}s after launch" if record.finished_at else ""
        if not record.ok:
            self.run.failures.append((record.step, f"{record.where}: {record.detail}"))
            logger.error(
                "[lighteval_nanotron] evaluation of step %d FAILED%s, training continues: %s: %s",
                record.step,
                took,
                record.where,
                record.detail,
            )
            return
        self.run.evaluated.append(record.step)
        if "log" in self.run.config.loggers:
            logger.info(
                "[lighteval_nanotron] step %d evaluated%s (%s):\n%s",
                record.step,
                took,
                record.where,
                format_results_table(self._results_of(record.step)),
            )

    def _results_of(self, step: int) -> dict:
        from lighteval_nanotron.tracking.paths import step_results_file

        path = step_results_file(self.run.config.output_dir, self.run.model_name, step)
        content = json.loads(path.read_text()) if path is not None else {}
        return {task: values for task, values in (content.get("results") or {}).items() if task != "all"}

    def _finish(self) -> None:
        if self.settings.launcher == "local":
            waiting = len(self.queue.pending) + len(self.queue.running)
            if waiting:
                logger.info("[lighteval_nanotron] training done; waiting for %d local evaluation(s)", waiting)
            started = time.perf_counter()
            self.queue.wait_all(poll_s=min(1.0, self.settings.status_interval_s))
            if waiting:
                logger.info("[lighteval_nanotron] local evaluations done after %.1fs", time.perf_counter() - started)
        else:
            self.queue.submit_all()
            running = [f"step {record.step}: {record.where}" for record in self.queue.in_flight]
            if running:
                logger.warning(
                    "[lighteval_nanotron] training done; Slurm evaluations still queued or running (their results go "
                    "to %s; `eval --checkpoints-dir` evaluates any that fail): %s",
                    self.run.config.output_dir,
                    "; ".join(running),
                )
        mean = self.run.step_times.mean_s
        logger.info(
            "[lighteval_nanotron] asynchronous evaluations: %d done %s, %d failed %s; training steps took %s",
            len(self.run.evaluated),
            sorted(self.run.evaluated),
            len(self.run.failures),
            [step for step, _ in self.run.failures],
            "unmeasured" if mean is None else f"{mean:.3f}s on average ({len(self.run.step_times.seconds)} steps)",
        )


def evaluator_for(config: EvaluationConfig) -> TrainingEvaluator:
    """The callback for a section: evaluating in the loop, or launching evaluations (`asynchronous`)."""
    return TrainingEvaluator(config, Launched if config.asynchronous is not None else None)
