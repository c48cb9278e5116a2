"""Launch "nodes" on this machine: two torchrun launches with a c10d rendezvous on loopback, or
plain processes carrying only SLURM's variables (as `srun` without torchrun would start them).

Each node runs in its own working directory, so that a relative output folder is node-local. Every
launch is bounded: when one process fails or the timeout passes, all of them are killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from lighteval_nanotron.parallel.distributed import free_loopback_port
from lighteval_nanotron.parallel.launch_env import SLURM_PORT_BASE, SLURM_PORT_SPAN

REPO = Path(__file__).resolve().parents[2]


def _env(extra: dict | None = None) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "TORCHELASTIC_"))}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    pythonpath = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")
    env["PYTHONPATH"] = pythonpath
    env.update(extra or {})
    return env


def _wait_all(processes: list[subprocess.Popen], logs: list[Path], timeout: float) -> list[str]:
    """Wait for every process; kill all on the first failure or at the timeout; return their logs."""
    deadline = time.monotonic() + timeout
    failed = None
    while any(p.poll() is None for p in processes):
        failed = next((i for i, p in enumerate(processes) if p.poll() not in (None, 0)), None)
        if failed is not None or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    texts = [log.read_text(errors="replace") for log in logs]
    codes = [p.returncode for p in processes]
    if any(code != 0 for code in codes):
        tails = "\n".join(f"--- process {i} (exit {c}):\n{t[-4000:]}" for i, (c, t) in enumerate(zip(codes, texts)))
        raise AssertionError(f"a node failed or timed out after {timeout:.0f}s (exits {codes}):\n{tails}")
    return texts


def run_torchrun_nodes(
    node_dirs: Sequence[Path],
    nproc_per_node: int,
    module_argv: Sequence[str],
    timeout: float = 300,
    static: bool = False,
) -> list[str]:
    """`torchrun --nnodes N --node-rank i --nproc-per-node P -m ...` once per folder of
    `node_dirs` (its working directory, node i); returns each node's output. The rendezvous is
    c10d (node order decided by arrival), or with `static` torchrun's static one (node i holds
    global ranks i*P .. i*P+P-1)."""
    port = free_loopback_port()
    if static:
        rendezvous = ["--master-addr", "127.0.0.1", "--master-port", str(port)]
    else:
        rendezvous = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "multinode"]
    processes, logs = [], []
    for node_rank, folder in enumerate(node_dirs):
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(node_dirs)),
            "--node-rank", str(node_rank), "--nproc-per-node", str(nproc_per_node), *rendezvous,
            "--max-restarts", "0", *module_argv,
        ]  # fmt: skip
        logs.append(folder / "node.log")
        with logs[-1].open("w") as log:
            processes.append(subprocess.Popen(command, cwd=folder, env=_env(), stdout=log, stderr=subprocess.STDOUT))
    return _wait_all(processes, logs, timeout)


def _job_id_with_free_port() -> int:
    """A job id whose derived master port (20000 + id % 20000) is a free port."""
    while not SLURM_PORT_BASE <= (port := free_loopback_port()) < SLURM_PORT_BASE + SLURM_PORT_SPAN:
        pass
    return port


def run_srun_tasks(
    node_dirs: Sequence[Path], tasks_per_node: int, module_argv: Sequence[str], timeout: float = 300
) -> list[str]:
    """`python -m ...` once per task with only SLURM's variables set (no torchrun's), the tasks of
    node i in `node_dirs[i]`; returns each task's output."""
    nodes = len(node_dirs)
    nodelist = f"node[{0:02d}-{nodes - 1:02d}]" if nodes > 1 else "node00"
    job = {
        "SLURM_JOB_ID": str(_job_id_with_free_port()),
        "SLURM_NTASKS": str(nodes * tasks_per_node),
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_TASKS_PER_NODE": f"{tasks_per_node}(x{nodes})",
        "SLURM_STEP_ID": "0",
    }
    processes, logs = [], []
    for node_id, folder in enumerate(node_dirs):
        folder.mkdir(parents=True, exist_ok=True)
        for local_id in range(tasks_per_node):
            task = {
                **job,
                "SLURM_PROCID": str(node_id * tasks_per_node + local_id),
                "SLURM_LOCALID": str(local_id),
                "SLURM_NODEID": str(node_id),
                "MASTER_ADDR": "127.0.0.1",  # the node names above do not resolve here
            }
            logs.append(folder / f"task{local_id}.log")
            with logs[-1].open("w") as log:
                command = [sys.executable, "-m", *module_argv]
                processes.append(
                    subprocess.Popen(command, cwd=folder, env=_env(task), stdout=log, stderr=subprocess.STDOUT)
                )
    return _wait_all(processes, logs, timeout)
