"""`lighteval-nanotron torchrun`: a job's failure is one `error:` line, printed once for the whole
job, without torchrun's report of the failed workers (plain torchrun prints it: checked beside)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

from lighteval_nanotron.cli.torchrun_cmd import _exit_status, split_command

REPO = Path(__file__).resolve().parents[2]
MISSING = "/nonexistent/checkpoints/10"


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_a_failed_job_is_one_error_line_without_torchrun_report(tmp_path):
    command = ["eval", MISSING, "--cpu", "--dp", "2", "--tasks", "lighteval|arc:easy|0", "--output-dir", str(tmp_path)]
    ours = _run(sys.executable, "-m", "lighteval_nanotron", "torchrun", "--nproc-per-node", "2", *command)
    assert ours.returncode == 2, ours.stderr[-3000:]
    lines = [line for line in ours.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and MISSING in lines[0], ours.stderr[-3000:]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "lighteval_nanotron"]
    plain = _run(*launcher, *command)
    assert plain.returncode != 0
    assert plain.stderr.count(lines[0]) == 1  # the workers print it once there too ...
    assert "ChildFailedError" in plain.stderr and len(plain.stderr.splitlines()) > 10  # ... then torchrun's report


def test_the_command_is_the_first_verb_after_torchrun_options():
    verbs = {"eval", "train"}
    assert split_command(["--nproc-per-node", "4", "eval", "ckpt", "--tp", "2"], verbs) == (
        ["--nproc-per-node", "4"],
        ["eval", "ckpt", "--tp", "2"],
    )
    with pytest.raises(ValueError, match="no command"):
        split_command(["--nproc-per-node", "4"], verbs)


def test_a_worker_killed_by_a_signal_is_named_in_one_line(capsys, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    killed = ProcessFailure(local_rank=1, pid=4242, exitcode=-9, error_file="")
    assert _exit_status({1: killed}) == 1
    assert capsys.readouterr().err == (
        "error: world rank 1 (pid 4242) was killed by SIGKILL (often the out-of-memory killer or a job limit); "
        "the other ranks were stopped.\n"
    )
    stopped = ProcessFailure(local_rank=0, pid=4243, exitcode=2, error_file="")
    assert _exit_status({0: stopped, 1: killed}) == 2  # rank 0 printed its error line itself
    assert capsys.readouterr().err == ""
