"""At most N evaluations in flight: later checkpoints wait in a queue, outcomes are recorded.

`pump()` is cheap and never waits: at most every `poll_interval_s` it asks the evaluations in
flight how they are doing, then launches what the free slots allow. An evaluation counts as done
when its launcher says it ended well **and** its results file holds every task; anything else (a
launch that fails, a non-zero exit, a Slurm job cancelled, timed out or forgotten without results)
is recorded as failed. Nothing here
raises: a failed launch is an outcome like any other.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.checkpoint_eval.launch.job import EvalJob
from lighteval_nanotron.checkpoint_eval.launch.launchers import mark_queued

logger = logging.getLogger(__name__)


@dataclass
class LaunchRecord:
    """One checkpoint's launched evaluation, from launch to outcome."""

    step: int
    where: str
    launched_at: float
    """`time.time()` when it was started or submitted."""
    finished_at: float | None = None
    """`time.time()` when its end was seen (None: still in flight)."""
    ok: bool | None = None
    detail: str = ""


class LaunchQueue:
    """Launches jobs through `launcher`, at most `max_in_flight` at once, and records their outcomes."""

    def __init__(
        self,
        launcher: Any,
        max_in_flight: int,
        poll_interval_s: float,
        has_results: Callable[[int], bool],
        on_outcome: Callable[[LaunchRecord], None],
    ) -> None:
        self.launcher = launcher
        self.max_in_flight = max_in_flight
        self.poll_interval_s = poll_interval_s
        self.has_results = has_results
        self.on_outcome = on_outcome
        self.pending: deque[EvalJob] = deque()
        self.running: list[tuple[Any, LaunchRecord]] = []
        self.records: list[LaunchRecord] = []
        self._last_poll = float("-inf")

    def add(self, job: EvalJob) -> None:
        """Queue `job` (a step already queued, in flight or recorded is not queued again), leaving a
        trace in its scripts folder (`launchers.mark_queued`) for a resumed training."""
        known = {queued.step for queued in self.pending} | {record.step for record in self.records}
        if job.step in known:
            return
        self.pending.append(job)
        try:
            mark_queued(job)
        except OSError as error:  # the launch writes there too, and records its own failure
            logger.warning("[lighteval_nanotron] step %d: cannot mark it queued: %s", job.step, error)

    def pump(self, force_poll: bool = False) -> None:
        """Record the evaluations that ended (asked every `poll_interval_s`, or now with
        `force_poll`), then launch queued jobs into the free slots."""
        now = time.monotonic()
        if self.running and (force_poll or now - self._last_poll >= self.poll_interval_s):
            self._last_poll = now
            self._poll()
        while self.pending and len(self.running) < self.max_in_flight:
            self._launch(self.pending.popleft())

    def submit_all(self) -> None:
        """Launch every queued job now, whatever the slots say (the training is over; a batch
        system queues them)."""
        self._poll()
        while self.pending:
            self._launch(self.pending.popleft())

    def wait_all(self, poll_s: float = 1.0) -> None:
        """Until nothing is queued or in flight, launching queued jobs as slots free (each
        evaluation ends by its own timeout at the latest)."""
        while self.pending or self.running:
            self.pump(force_poll=True)
            if self.pending or self.running:
                time.sleep(poll_s)

    @property
    def in_flight(self) -> list[LaunchRecord]:
        return [record for _, record in self.running]

    def _launch(self, job: EvalJob) -> None:
        try:
            launch = self.launcher.launch(job)
        except Exception as error:  # noqa: BLE001 - a launch that fails is recorded; training goes on
            record = LaunchRecord(job.step, "not launched", time.time(), time.time(), False, _describe(error))
            self.records.append(record)
            self.on_outcome(record)
            return
        record = LaunchRecord(job.step, launch.where, time.time())
        self.records.append(record)
        self.running.append((launch, record))
        logger.info("[lighteval_nanotron] step %d: evaluation launched (%s)", job.step, launch.where)

    def _poll(self) -> None:
        still: list[tuple[Any, LaunchRecord]] = []
        for launch, record in self.running:
            try:
                outcome = launch.poll()
            except Exception as error:  # noqa: BLE001 - e.g. scontrol timed out: ask again next time
                logger.warning("[lighteval_nanotron] step %d: cannot ask %s: %s", record.step, record.where, error)
                still.append((launch, record))
                continue
            if outcome is None:
                still.append((launch, record))
                continue
            record.finished_at = time.time()
            written = self.has_results(record.step)
            record.ok = outcome.ok and written
            record.detail = outcome.detail if written or not outcome.ok else f"{outcome.detail}, but no results written"
            self.on_outcome(record)
        self.running = still


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
