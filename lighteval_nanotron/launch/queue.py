"""At most N evaluations in flight: later checkpoints wait in a queue, outcomes are recorded.

`pump()`, at most every `status_interval_s`, asks the evaluations in flight how they are doing, then
launches what the free slots allow; `pump_in_background()` does that on a worker thread, so that a
training step never waits on the launcher's commands (`sbatch` and `scontrol` answer in seconds
from a busy Slurm controller, up to `launchers.COMMAND_TIMEOUT_S`) or on the output folder. An
evaluation counts as done when its launcher says it ended well **and** its results file holds every
task; anything else (a launch that fails, a non-zero exit, a Slurm job cancelled, timed out or
forgotten without results) is recorded as failed. Nothing here raises: a failed launch is an
outcome like any other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from lighteval_nanotron.launch.job import EvalJob
from lighteval_nanotron.launch.launchers import Launch, Launcher, Outcome, mark_queued

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
        launcher: Launcher,
        max_in_flight: int,
        status_interval_s: float,
        has_results: Callable[[int], bool],
        on_outcome: Callable[[LaunchRecord], None],
    ) -> None:
        self.launcher = launcher
        self.max_in_flight = max_in_flight
        self.status_interval_s = status_interval_s
        self.has_results = has_results
        self.on_outcome = on_outcome
        self.pending: deque[EvalJob] = deque()
        self.running: list[tuple[Launch, LaunchRecord]] = []
        self.records: list[LaunchRecord] = []
        self._last_poll = float("-inf")
        self._lock = threading.Lock()
        """Guards `pending` and `records`, which `add` (the training's thread) and a round share."""
        self._round: threading.Thread | None = None

    def add(self, job: EvalJob) -> None:
        """Queue `job` (a step already queued, in flight or recorded is not queued again), leaving a
        trace in its scripts folder (`launchers.mark_queued`) for a resumed training."""
        with self._lock:
            known = {queued.step for queued in self.pending} | {record.step for record in self.records}
            if job.step in known:
                return
            self.pending.append(job)
        try:
            mark_queued(job)
        except OSError as error:  # the launch writes there too, and records its own failure
            logger.warning("[lighteval_nanotron] step %d: cannot mark it queued: %s", job.step, error)

    def pump(self, force_poll: bool = False) -> None:
        """Record the evaluations that ended (asked every `status_interval_s`, or now with
        `force_poll`), then launch queued jobs into the free slots."""
        if self._poll_due(force_poll):
            self._last_poll = time.monotonic()
            self._poll()
        while (job := self._next_job(self.max_in_flight)) is not None:
            self._launch(job)

    def pump_in_background(self) -> None:
        """`pump()` on a worker thread when there is something to do and no round is running: returns
        at once. A round's error is logged, never raised into the caller."""
        if self._round is not None and self._round.is_alive():
            return
        if not self._poll_due(False) and not (self.pending and len(self.running) < self.max_in_flight):
            return
        self._round = threading.Thread(target=self._logged_pump, name="lighteval-nanotron-launches", daemon=True)
        self._round.start()

    def submit_all(self) -> None:
        """Launch every queued job now, whatever the slots say (the training is over; a batch
        system queues them)."""
        self._finish_round()
        self._poll()
        while (job := self._next_job(None)) is not None:
            self._launch(job)

    def wait_all(self, poll_s: float = 1.0) -> None:
        """Until nothing is queued or in flight, launching queued jobs as slots free (each
        evaluation ends by its own timeout at the latest)."""
        self._finish_round()
        while self.pending or self.running:
            self.pump(force_poll=True)
            if self.pending or self.running:
                time.sleep(poll_s)

    @property
    def in_flight(self) -> list[LaunchRecord]:
        return [record for _, record in self.running]

    def _poll_due(self, force: bool) -> bool:
        return bool(self.running) and (force or time.monotonic() - self._last_poll >= self.status_interval_s)

    def _next_job(self, slots: int | None) -> EvalJob | None:
        """The next queued job when a slot is free (`slots` None: no limit)."""
        with self._lock:
            if self.pending and (slots is None or len(self.running) < slots):
                return self.pending.popleft()
        return None

    def _logged_pump(self) -> None:
        try:
            self.pump()
        except Exception:  # noqa: BLE001 - a worker thread's error would otherwise only reach stderr
            logger.exception("[lighteval_nanotron] checking the launched evaluations failed; training goes on")

    def _finish_round(self) -> None:
        if self._round is not None:
            self._round.join()
            self._round = None

    def _launch(self, job: EvalJob) -> None:
        try:
            launch = self.launcher.launch(job)
        except Exception as error:  # noqa: BLE001 - a launch that fails is recorded; training goes on
            record = LaunchRecord(job.step, "not launched", time.time(), time.time(), False, _describe(error))
            with self._lock:
                self.records.append(record)
            self._report(record)
            return
        record = LaunchRecord(job.step, launch.where, time.time())
        with self._lock:
            self.records.append(record)
        self.running.append((launch, record))
        logger.info("[lighteval_nanotron] step %d: evaluation launched (%s)", job.step, launch.where)

    def _poll(self) -> None:
        still: list[tuple[Launch, LaunchRecord]] = []
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
            try:
                written = self.has_results(record.step)
            except Exception as error:  # noqa: BLE001 - e.g. the output folder unreadable: no results to show
                written, outcome = False, Outcome(False, f"{outcome.detail}, but its results cannot be read ({error})")
            record.ok = outcome.ok and written
            record.detail = outcome.detail if written or not outcome.ok else f"{outcome.detail}, but no results written"
            self._report(record)
        self.running = still

    def _report(self, record: LaunchRecord) -> None:
        try:
            self.on_outcome(record)
        except Exception:  # noqa: BLE001 - the record stands; reporting it must not stop training
            logger.exception("[lighteval_nanotron] step %d: reporting its evaluation's outcome failed", record.step)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
