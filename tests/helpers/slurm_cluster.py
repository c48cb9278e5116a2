"""A real single-node Slurm cluster for a test: munged, slurmctld and slurmd from Debian's packages,
started in a temporary folder on free ports, stopped (and reaped) afterwards.

    with slurm_cluster(tmp_path) as env:       # env: os.environ + SLURM_CONF
        subprocess.run(["sbatch", "job.sh"], env=env)

Without the packages the caller skips (`SLURM_MISSING` says why and how to install them; `.ci/run`
installs them on CI's machines).
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from lighteval_nanotron.parallel.distributed import free_loopback_port

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")
SLURM_MISSING = (
    "Slurm is not installed ({missing} not found): `apt-get install --no-install-recommends slurmctld slurmd "
    "slurm-client munge` (as .ci/run does) to run the Slurm launcher against a real Slurm"
)
START_TIMEOUT_S = 60


def missing_binaries() -> List[str]:
    return [name for name in BINARIES if shutil.which(name) is None]


def _node_line() -> str:
    """This machine as slurmd sees it (`slurmd -C`: NodeName, CPUs, sockets, memory)."""
    done = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.splitlines()[0]


def _config(folder: Path, munge_socket: Path) -> str:
    host = socket.gethostname().split(".")[0]
    return "\n".join(
        [
            "ClusterName=lnt-test",
            f"SlurmctldHost={host}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={free_loopback_port()}",
            f"SlurmdPort={free_loopback_port()}",
            f"StateSaveLocation={folder / 'state'}",
            f"SlurmdSpoolDir={folder / 'spool'}",
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
            f"SlurmdPidFile={folder / 'slurmd.pid'}",
            f"SlurmctldLogFile={folder / 'slurmctld.log'}",
            f"SlurmdLogFile={folder / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/builtin",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MinJobAge=600",
            _node_line() + " State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4",
            "",
        ]
    )


@contextlib.contextmanager
def slurm_cluster(folder: Path) -> Iterator[Dict[str, str]]:
    """Start munged, slurmctld and slurmd under `folder`; yield the environment that reaches them."""
    for name in ("state", "spool", "munge"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    munge = folder / "munge"
    munge.chmod(0o711)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = munge / "munge.sock"
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, socket_path))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons: List[subprocess.Popen] = []
    logs: List = []

    def start(command: List[str], log_name: str) -> None:
        log = open(folder / log_name, "w")
        logs.append(log)
        daemons.append(
            subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        )

    try:
        start(
            [
                "munged", "-F", "-f", f"--socket={socket_path}", f"--key-file={key}",
                f"--log-file={munge / 'munged.log'}", f"--pid-file={munge / 'munged.pid'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
            "munged.out",
        )  # fmt: skip
        _wait(lambda: socket_path.exists(), "munged's socket", folder)
        start(["slurmctld", "-D", "-f", str(conf)], "slurmctld.out")
        start(["slurmd", "-D", "-f", str(conf)], "slurmd.out")
        _wait(lambda: _node_idle(env), "an idle Slurm node", folder)
        yield env
    finally:
        for daemon in reversed(daemons):
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
        for daemon in reversed(daemons):
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(timeout=15)
        for log in logs:
            log.close()


def _node_idle(env: Dict[str, str]) -> bool:
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and done.stdout.strip() == "idle"


def _wait(ready, what: str, folder: Path, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(folder.glob("*.out")))
            raise AssertionError(f"no {what} within {timeout:.0f}s:\n{logs}")
        time.sleep(0.3)


def wait_for_job(job_id: str, env: Dict[str, str], timeout: float) -> Optional[str]:
    """The job's final state (COMPLETED, FAILED, CANCELLED, ...), polling `scontrol` until it ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True, text=True)
        fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
        state = fields.get("JobState")
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"Slurm job {job_id} still running after {timeout:.0f}s")
