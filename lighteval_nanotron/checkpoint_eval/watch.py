"""Follow a training's checkpoint folder and evaluate each checkpoint once it is complete.

    lighteval-nanotron eval --checkpoints-dir checkpoints --watch --tasks ... --output-dir eval_results

The same evaluation as a backfill (`runner`): tasks, datasets, prompts and the model are prepared
once (at the first checkpoint that needs evaluating), and each checkpoint's weights are loaded into
that model. Each round, world rank 0 looks at the folder (`arrivals.ArrivalScanner`) and decides
what to do; the decision is broadcast, so every rank evaluates the same checkpoint or sleeps the
same poll interval:

- evaluate the oldest ready checkpoint (complete and settled), or with `skip_to_newest` the newest
  one, leaving the older ones waiting for a later backfill; a step whose results file already holds
  every task (a restart, or the training hook) is skipped;
- stop when a stop file exists, when a rank received SIGINT/SIGTERM (the evaluation in progress
  finishes and is written first), or when the training's last checkpoint is handled;
- otherwise sleep `poll_interval_s` (cut short by a signal) and look again; also while the
  checkpoints folder is not created yet (Nanotron creates it at its first save).

A checkpoint that cannot be read or evaluated is recorded and skipped, after every rank has checked
that the others still answer; the watch goes on and fails at the end, naming those checkpoints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed as dist

from lighteval_nanotron.checkpoint_eval.arrivals import ArrivalScanner, Scan
from lighteval_nanotron.checkpoint_eval.discovery import (
    CheckpointInfo,
    checkpoint_info,
    default_model_name,
    pending_tasks,
)
from lighteval_nanotron.checkpoint_eval.loading import check_same_model
from lighteval_nanotron.checkpoint_eval.mesh_setup import collectively, parallel_context_for
from lighteval_nanotron.checkpoint_eval.runner import (
    CheckpointEvaluator,
    EvaluationPlan,
    read_models,
    with_inputs,
)
from lighteval_nanotron.checkpoint_eval.stop_signals import stop_signals
from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from lighteval_nanotron.errors import EvaluationError, LightevalNanotronError
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
from lighteval_nanotron.parallel.once import computed_once
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.setup.finished_steps import finished_tasks_by_step
from lighteval_nanotron.setup.tasks import load_tasks, result_names


@dataclass(frozen=True)
class WatchDecision:
    """What every rank does next."""

    action: str
    """`evaluate`, `wait` or `stop`."""
    checkpoint: CheckpointInfo | None = None
    passed_over: tuple[int, ...] = ()
    """Ready steps left out by `skip_to_newest`."""
    reason: str = ""
    """Why the watch stops, or why it waits when not for checkpoints being written."""
    writing: tuple[int, ...] = ()


def decide(scan: Scan, handled: set[int], stop_reason: str | None, skip_to_newest: bool) -> WatchDecision:
    """The next move, from what the folder holds and what was handled (a pure function)."""
    if stop_reason is not None:
        return WatchDecision("stop", reason=stop_reason)
    if not scan.root_exists:
        return WatchDecision("wait", reason="not created yet: Nanotron creates it at its first checkpoint save")
    if scan.ready:
        if skip_to_newest:
            return WatchDecision("evaluate", scan.ready[-1], passed_over=tuple(info.step for info in scan.ready[:-1]))
        return WatchDecision("evaluate", scan.ready[0])
    last = scan.last_step
    if last is not None and last in handled and not any(step < last for step in scan.writing):
        return WatchDecision("stop", reason=f"the training's last checkpoint (step {last}) is handled")
    return WatchDecision("wait", writing=tuple(scan.writing))


@dataclass
class WatchReport:
    """The outcome, the same on every rank."""

    evaluated: list[int] = field(default_factory=list)
    already_done: list[int] = field(default_factory=list)
    """Steps whose results file already held every task."""
    passed_over: list[int] = field(default_factory=list)
    """Steps left out by `skip_to_newest`."""
    failures: list[tuple[int, str]] = field(default_factory=list)
    stop_reason: str = ""


class _Watch:
    """The state every rank keeps in step: what was handled, and the evaluator once built."""

    def __init__(
        self,
        config: CheckpointEvalConfig,
        parallel_context: Any,
        on_result: Callable[[EvaluationResult], None] | None,
        notify: Callable[[str], None],
    ) -> None:
        self.config = config
        self.parallel_context = parallel_context
        self.world = parallel_context.world_pg
        self.on_result = on_result
        self.notify = notify

        self.tasks = collectively(self.world, "loading the tasks", lambda: load_tasks(config))
        self.evaluator: CheckpointEvaluator | None = None
        self.plan: EvaluationPlan | None = None
        """Built at the first checkpoint: its model, tokenizer, dtype, held-out domains and docs (whose
        digests, with the identity, decide whether a step is done)."""
        self.report = WatchReport()

    def handle(self, info: CheckpointInfo) -> None:
        """Evaluate `info` unless its results are there. A failure reading or evaluating it is this
        checkpoint's (recorded, the watch goes on); a failure building the evaluator stops the watch.
        Every rank is in the same phase when one raises (`collectively`), so all take the same branch."""
        try:
            info = collectively(self.world, f"reading checkpoint {info.path}", lambda: checkpoint_info(info.path))
            todo = self._pending(info)
        except LightevalNanotronError as error:
            self._failed(info, error)
            return
        if info.step not in todo:
            self.report.already_done.append(info.step)
            self.notify(f"watch: step {info.step} already has results for every task: skipped")
            return
        if self.evaluator is None:
            self.evaluator = self._build(info, todo)
        self.evaluator.setup.tasks_by_step[info.step] = todo[info.step]
        self.notify(f"watch: evaluating step {info.step} ({info.path})")
        try:
            self.evaluator.evaluate(info, self.on_result)
        except LightevalNanotronError as error:
            self._failed(info, error)
            return
        self.report.evaluated.append(info.step)

    def _pending(self, info: CheckpointInfo) -> dict[int | None, list[str]]:
        """The tasks `info` still needs (its model checked against the first checkpoint's)."""
        if self.plan is not None:
            reference = self.plan.checkpoint_model
            collectively(
                self.world,
                f"reading checkpoint {info.path}",
                lambda: check_same_model(reference, read_checkpoint_model(info.path), info.path),
            )
        else:
            checkpoint_model, model_name = collectively(
                self.world,
                f"reading checkpoint {info.path}",
                lambda: (read_checkpoint_model(info.path), self.config.model_name or default_model_name(info.path)),
            )
            plan = EvaluationPlan([info], [], checkpoint_model, model_name, None, None, self.tasks)
            self.plan = with_inputs(self.config, self.world, plan)

        identity = self.plan.identity(self.config)
        done = finished_tasks_by_step(self.config.output_dir, self.plan.model_name, self.world, identity)
        names = result_names(self.config, self.tasks)
        return pending_tasks([info], names, done, self.config.max_samples, self.plan.digests)

    def _failed(self, info: CheckpointInfo, error: BaseException) -> None:
        # Go on only with every rank still there (a peer that timed out breaks the group).
        collectively(self.world, "checking that every rank still answers", lambda: None)
        self.report.failures.append((info.step, str(error)))
        self.notify(f"watch: step {info.step} FAILED, going on: {error}")

    def _build(self, info: CheckpointInfo, todo: dict[int | None, list[str]]) -> CheckpointEvaluator:
        collectively(self.world, f"reading checkpoint {info.path}", lambda: read_models([info], self.config))
        plan = dataclasses.replace(self.plan, checkpoints=[info], tasks_by_step=todo)  # its tokenizer, domains, docs
        return CheckpointEvaluator(self.config, self.parallel_context, plan)

    def close(self) -> None:
        if self.evaluator is not None:
            self.evaluator.close()


def _next_decision(
    world: Any,
    own_signal: str | None,
    scanner: ArrivalScanner,
    handled: set[int],
    stop_file: Path | None,
    skip_to_newest: bool,
) -> WatchDecision:
    """Collective: a signal received by any rank, then world rank 0's look at the folder, broadcast."""
    signals: list[str | None] = [None] * dist.get_world_size(world)
    dist.all_gather_object(signals, own_signal, group=world)
    requested = next((reason for reason in signals if reason), None)

    def look() -> WatchDecision:
        reason = requested
        if reason is None and stop_file is not None and stop_file.exists():
            reason = f"stop file {stop_file} exists"
        return decide(scanner.scan(time.monotonic(), handled), handled, reason, skip_to_newest)

    first = dist.get_global_rank(world, 0)
    return collectively(world, "looking at the checkpoints", lambda: computed_once(look, world, first))


def watch_checkpoints(
    config: CheckpointEvalConfig,
    on_result: Callable[[EvaluationResult], None] | None = None,
    notify: Callable[[str], None] | None = None,
) -> WatchReport:
    """Follow `config.checkpoints_dir` until the training's last checkpoint, a stop file or a
    signal (every rank calls it). `on_result` is called on the reporting rank after each
    checkpoint's results are written; `notify(line)` on world rank 0 with what the watch does.
    Raises EvaluationError at the end when some checkpoint failed."""
    from lighteval_nanotron.parallel.deadline import bounded_collectives

    config.check_watch()
    with (
        stop_signals() as stop,
        parallel_context_for(config.tp, config.pp, config.dp, config.cpu) as parallel_context,
        bounded_collectives(parallel_context, config.failure_timeout_s),
    ):
        world = parallel_context.world_pg
        speaks = dist.get_rank(world) == 0
        say = notify if notify is not None and speaks else (lambda _line: None)
        scanner = ArrivalScanner(Path(config.checkpoints_dir), config.settle_s)
        stop_file = Path(config.stop_file) if config.stop_file else None
        watch = _Watch(config, parallel_context, on_result, say)
        handled: set[int] = set()
        waiting_for: tuple[tuple[int, ...], str] | None = None
        try:
            while True:
                decision = _next_decision(world, stop.reason, scanner, handled, stop_file, config.skip_to_newest)
                if decision.action == "stop":
                    watch.report.stop_reason = decision.reason
                    say(f"watch: stopped: {decision.reason}")
                    break
                if decision.action == "wait":
                    if (decision.writing, decision.reason) != waiting_for:
                        being_written = f" (being written: {list(decision.writing)})" if decision.writing else ""
                        why = f" ({decision.reason})" if decision.reason else ""
                        say(f"watch: waiting for checkpoints in {config.checkpoints_dir}{why}{being_written}")
                        waiting_for = (decision.writing, decision.reason)
                    stop.wait(config.poll_interval_s)
                    continue
                waiting_for = None
                if decision.passed_over:
                    handled.update(decision.passed_over)
                    watch.report.passed_over.extend(decision.passed_over)
                    say(f"watch: skipping to the newest checkpoint; left for a backfill: {list(decision.passed_over)}")
                handled.add(decision.checkpoint.step)
                watch.handle(decision.checkpoint)
        finally:
            watch.close()
    report = watch.report
    if report.failures:
        listed = "; ".join(f"step {step}: {message}" for step, message in report.failures)
        raise EvaluationError(
            f"{len(report.failures)} checkpoint(s) could not be evaluated ({listed}). The others were; evaluate "
            "these again with `eval --checkpoints-dir` (a backfill) once fixed."
        )
    return report
