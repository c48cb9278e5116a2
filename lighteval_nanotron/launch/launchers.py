"""Start one evaluation and ask how it is doing: local processes in their own session, or a Slurm job.

    launch = launcher.launch(job)    # writes the script, starts it, returns at once
    launch.poll()                    # None while it runs, then an Outcome (once)

A local evaluation runs `bash eval.sh` in a new session (its own process group: the training's
process group and its signals are untouched, and the whole evaluation can be stopped at once); it is
reaped when it ends, so no zombie is left. A Slurm evaluation is `sbatch --parsable eval.sbatch`;
its state is read with `scontrol show job` (no accounting database needed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Protocol, Union

from lighteval_nanotron.launch.job import EvalJob
from lighteval_nanotron.launch.script import KILL_AFTER_S, local_script, slurm_script
from lighteval_nanotron.options.launch import AsyncEvaluationConfig

COMMAND_TIMEOUT_S = 60
"""The longest a Slurm command (sbatch, scontrol) may take before it counts as failed."""
ERROR_TAIL_BYTES = 65536
"""How much of a failed evaluation's log is searched for its `error:` line."""
LOCAL_SCRIPT = "eval.sh"
SLURM_SCRIPT = "eval.sbatch"
SLURM_FORGOTTEN = "Invalid job id specified"
"""What `scontrol show job` says of a job the controller no longer knows (purged after MinJobAge)."""
QUEUED_MARKER = "queued"
"""Written in a job's scripts folder when it is queued (`mark_queued`)."""
LAUNCHED, QUEUED = "launched", "queued"
"""What `launch_history` says an earlier run did with a job."""
SLURM_ACTIVE = (
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STOPPED",
    "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
)  # fmt: skip
"""Job states (`squeue --help`, JOB STATE CODES) of a job not over: still to run, running, held or
requeued (`SPECIAL_EXIT` is a requeue held for release). Any other state is the job's end."""


@dataclass(frozen=True)
class Outcome:
    """How a launched evaluation ended, as its launcher sees it (the results file is checked besides)."""

    ok: bool
    detail: str


class Launch(Protocol):
    job: EvalJob
    where: str
    """`pid 1234` or `Slurm job 57`, for the log."""

    def poll(self) -> Outcome | None: ...


def _with_error_line(detail: str, log: Path) -> str:
    """`detail` followed by the last `error:` line of `log` (what the evaluation said it failed on: a
    settings conflict, a damaged checkpoint), so the training log names the cause, not only the file."""
    try:
        with open(log, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - ERROR_TAIL_BYTES))
            tail = file.read().decode("utf-8", errors="replace")
    except OSError:
        return detail
    said = [line for line in tail.splitlines() if line.startswith("error: ")]
    return f"{detail}: {said[-1]}" if said else detail


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class LocalLaunch:
    """One local evaluation: a process group led by `bash eval.sh`."""

    def __init__(
        self, job: EvalJob, process: subprocess.Popen, log: IO[str], deadline: float, release: Callable[[], None]
    ) -> None:
        self.job = job
        self.process = process
        self.where = f"pid {process.pid}"
        self._log = log
        self._deadline = deadline
        self._release = release

    def poll(self) -> Outcome | None:
        code = self.process.poll()
        if code is None:
            if time.monotonic() < self._deadline:
                return None
            self.stop()  # `timeout` in the script should have ended it: the backstop
            return self._finished(Outcome(False, "still running past its timeout: killed"))
        if code == 0:
            return self._finished(Outcome(True, "exit status 0"))
        detail = f"timed out (exit status {code})" if code in (124, 137) else f"exit status {code}"
        if code < 0:
            detail = f"killed by {signal.Signals(-code).name}"
        log = Path(self._log.name)
        return self._finished(Outcome(False, _with_error_line(f"{detail} (log: {log})", log)))

    def stop(self) -> None:
        """Kill the evaluation's whole process group and reap its leader."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def _finished(self, outcome: Outcome) -> Outcome:
        self._log.close()
        self._release()
        return outcome


class LocalLauncher:
    """Evaluations as process groups on this machine, each on its own group of `devices` (or CPU)."""

    def __init__(self, settings: AsyncEvaluationConfig) -> None:
        self.settings = settings
        devices, size = settings.device_list, settings.world_size
        groups = [devices[i : i + size] for i in range(0, len(devices), size)]
        self._free: deque[list[str] | None] = deque(groups or [None] * settings.max_in_flight)

    def script(self, job: EvalJob) -> str:
        return local_script(job, self.settings)

    def launch(self, job: EvalJob) -> LocalLaunch:
        """Start `job` on a free group of devices; a launch that fails (its script or log cannot be
        written, bash cannot start) gives the group back (kept, every later launch failed)."""
        group = self._free.popleft()
        try:
            job, process, log = self._start(job, group)
        except BaseException:
            self._free.appendleft(group)
            raise
        deadline = time.monotonic() + self.settings.timeout_s + KILL_AFTER_S + 30
        return LocalLaunch(job, process, log, deadline, lambda: self._free.append(group))

    def _start(self, job: EvalJob, group: list[str] | None) -> tuple[EvalJob, subprocess.Popen, IO[str]]:
        if group is not None:
            job = replace(job, exports={**job.exports, "CUDA_VISIBLE_DEVICES": ",".join(group)})
        script = _write(job.scripts_dir / LOCAL_SCRIPT, self.script(job))
        job.logs_dir.mkdir(parents=True, exist_ok=True)
        log = open(job.logs_dir / "eval.log", "w")
        try:
            process = subprocess.Popen(
                ["bash", str(script)], cwd=job.workdir, env=job.base_env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        except BaseException:
            log.close()
            raise
        return job, process, log


class SlurmLaunch:
    """One submitted Slurm job."""

    def __init__(self, job: EvalJob, job_id: str) -> None:
        self.job = job
        self.job_id = job_id
        self.where = f"Slurm job {job_id}"

    def poll(self) -> Outcome | None:
        state, exit_code = slurm_job_state(self.job_id, self.job.base_env)
        if state in SLURM_ACTIVE:
            return None
        if state is None:
            return Outcome(True, "no longer known to Slurm")  # purged: its results file decides
        log = self.job.logs_dir / f"slurm-{self.job_id}.out"
        detail = f"Slurm state {state}, exit code {exit_code} (log: {log})"
        if state == "COMPLETED":
            return Outcome(True, detail)
        return Outcome(False, _with_error_line(detail, log))


class SlurmLauncher:
    """Evaluations as `sbatch` jobs."""

    command_timeout_s: float = COMMAND_TIMEOUT_S

    def __init__(self, settings: AsyncEvaluationConfig) -> None:
        self.settings = settings

    def script(self, job: EvalJob) -> str:
        return slurm_script(job, self.settings)

    def launch(self, job: EvalJob) -> SlurmLaunch:
        script = _write(job.scripts_dir / SLURM_SCRIPT, self.script(job))
        job.logs_dir.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                ["sbatch", "--parsable", str(script)], cwd=job.workdir, env=job.base_env, capture_output=True,
                text=True, timeout=self.command_timeout_s, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return SlurmLaunch(job, self._submitted_anyway(job, script))
        if done.returncode != 0:
            raise OSError(f"sbatch {script} failed (exit status {done.returncode}): {done.stderr.strip()}")
        return SlurmLaunch(job, done.stdout.strip().split(";")[0])

    def _submitted_anyway(self, job: EvalJob, script: Path) -> str:
        """The id of `job` when sbatch timed out but the controller queued it all the same (recorded as
        never launched, it would run while its slot went to the next job): found by its name among our jobs."""
        done = subprocess.run(
            ["squeue", "--me", "--noheader", "--format=%i", f"--name={job.name}"], env=job.base_env,
            capture_output=True, text=True, timeout=self.command_timeout_s, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        found = done.stdout.split() if done.returncode == 0 else []
        if len(found) != 1:
            listed = f"squeue lists {found}" if found else f"squeue lists none ({done.stderr.strip() or 'no job'})"
            raise OSError(
                f"sbatch {script} did not answer within {self.command_timeout_s:g}s and {listed} named {job.name}"
            )
        return found[0]


def slurm_job_state(job_id: str, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(JobState, ExitCode) of a job from `scontrol show job -o`, (None, None) once Slurm forgot it.
    Any other failure of scontrol (the controller unreachable or timing out) is an OSError: the job
    is not known to be gone (taken as forgotten, a running job would be recorded as failed and its
    slot given to the next one)."""
    done = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0:
        if SLURM_FORGOTTEN in done.stderr:
            return None, None
        raise OSError(f"scontrol show job {job_id} failed (exit status {done.returncode}): {done.stderr.strip()}")
    fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
    return fields.get("JobState"), fields.get("ExitCode")


def mark_queued(job: EvalJob) -> None:
    """Leave a trace of `job` being queued, for a resumed training to find it if it is never launched."""
    _write(job.scripts_dir / QUEUED_MARKER, "")


def launch_history(job: EvalJob) -> str | None:
    """What an earlier run did with `job`: `LAUNCHED` (its script is written at launch), `QUEUED`
    (queued and never launched: the training ended first), None (nothing)."""
    if any((job.scripts_dir / name).is_file() for name in (LOCAL_SCRIPT, SLURM_SCRIPT)):
        return LAUNCHED
    return QUEUED if (job.scripts_dir / QUEUED_MARKER).is_file() else None


Launcher = Union[LocalLauncher, SlurmLauncher]
"""What starts evaluations: process groups on this machine or Slurm jobs."""


def launcher_for(settings: AsyncEvaluationConfig) -> Launcher:
    return SlurmLauncher(settings) if settings.launcher == "slurm" else LocalLauncher(settings)
