"""Who launched this process: torchrun's variables, or SLURM's under a plain `srun` (no torchrun).

torch.distributed and Nanotron's `ParallelContext` read torchrun's variables (`RANK`, `WORLD_SIZE`,
`LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`). Under `srun python -m lighteval_nanotron ...` (one
task per process) only SLURM's are set; `apply_launcher_env()` fills torchrun's from them:

    RANK <- SLURM_PROCID          WORLD_SIZE <- SLURM_STEP_NUM_TASKS (else SLURM_NTASKS)
    LOCAL_RANK <- SLURM_LOCALID   LOCAL_WORLD_SIZE <- this node's entry of SLURM_STEP_TASKS_PER_NODE
    GROUP_RANK <- SLURM_NODEID    MASTER_ADDR <- first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST
    MASTER_PORT <- 20000 + SLURM_JOB_ID % 20000 (the same on every task of the job)

A variable already set always wins (an sbatch script may export MASTER_ADDR / MASTER_PORT), and
nothing is mapped when `RANK` is set (torchrun launched us) or `SLURM_PROCID` is not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

from lighteval_nanotron.errors import ConfigError

SLURM_PORT_BASE = 20000
SLURM_PORT_SPAN = 20000


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: `gpu[003-005,9],cpu1` -> `gpu003`."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise ConfigError(f"Cannot read the SLURM node list {nodelist!r}: export MASTER_ADDR in the sbatch script.")
    prefix, ranges = match.groups()
    if ranges is None:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def tasks_on_node(tasks_per_node: str, node_id: int) -> int:
    """This node's task count from SLURM's compact form: `4(x2),3` is 4, 4, 3 tasks on nodes 0, 1, 2."""
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            raise ConfigError(f"Cannot read SLURM tasks per node {tasks_per_node!r}: export LOCAL_WORLD_SIZE.")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    if node_id >= len(counts):
        raise ConfigError(f"SLURM node id {node_id} is outside the tasks-per-node list {tasks_per_node!r}.")
    return counts[node_id]


def torch_env_from_slurm(environ: Mapping[str, str]) -> dict[str, str]:
    """The torchrun variables that SLURM's describe and `environ` lacks ({} outside an srun task,
    or when torchrun's RANK is already set)."""
    if "RANK" in environ or "SLURM_PROCID" not in environ:
        return {}
    world = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS")
    if world is None:
        raise ConfigError("SLURM_PROCID is set but not SLURM_NTASKS: launch with `srun --ntasks N ...`.")
    node_id = int(environ.get("SLURM_NODEID", "0"))
    mapped = {
        "RANK": environ["SLURM_PROCID"],
        "WORLD_SIZE": world,
        "LOCAL_RANK": environ.get("SLURM_LOCALID", "0"),
        "GROUP_RANK": str(node_id),
    }
    per_node = environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE")
    if per_node:
        mapped["LOCAL_WORLD_SIZE"] = str(tasks_on_node(per_node, node_id))
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if nodelist:
        mapped["MASTER_ADDR"] = first_host(nodelist)
    if "SLURM_JOB_ID" in environ:
        mapped["MASTER_PORT"] = str(SLURM_PORT_BASE + int(environ["SLURM_JOB_ID"]) % SLURM_PORT_SPAN)
    return {key: value for key, value in mapped.items() if key not in environ}


def apply_launcher_env(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Fill torchrun's variables from SLURM's under a plain srun (see module doc); return what was set."""
    environ = os.environ if environ is None else environ
    added = torch_env_from_slurm(environ)
    environ.update(added)
    return added


def node_rank() -> int:
    """This process's node index (torchrun's GROUP_RANK, SLURM's SLURM_NODEID; 0 on one machine)."""
    return int(os.environ.get("GROUP_RANK", os.environ.get("SLURM_NODEID", "0")))


def world_rank() -> int:
    """This process's rank in the whole job (RANK, SLURM's SLURM_PROCID; 0 for a single process)."""
    return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))


def local_rank() -> int:
    """This process's index on its node (LOCAL_RANK; 0 for a single process)."""
    return int(os.environ.get("LOCAL_RANK", "0"))
