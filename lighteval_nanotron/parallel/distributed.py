"""Start `torch.distributed` and build Nanotron's `ParallelContext` without CUDA.

`ParallelContext.__init__` only calls Nanotron's CUDA-only initialisation when no default process
group exists, and it reads `RANK` / `WORLD_SIZE` from the environment. So on CPU: set the torchrun
variables (torchrun does), call `enable_cpu_support()`, then `build_parallel_context(tp, pp, dp)`.

    torchrun --nproc_per_node 4 script.py   # in script.py:
    enable_cpu_support(); parallel_context = build_parallel_context(tp=2, pp=2, dp=1)
"""

import os
import socket
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import ConfigError, LayoutError
from lighteval_nanotron.nanotron_compat.imports import import_nanotron
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron
from lighteval_nanotron.parallel.device import is_cpu_support_enabled
from lighteval_nanotron.parallel.launch_env import apply_launcher_env

if TYPE_CHECKING:
    from nanotron.parallel import ParallelContext

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
DEFAULT_TIMEOUT = timedelta(minutes=10)


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a world started on this machine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_rank_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    """The variables torchrun would set for `rank` of a one-machine world rendezvousing on `port`."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }


def init_process_group_from_env(backend: str = "gloo", timeout: timedelta = DEFAULT_TIMEOUT) -> None:
    """Initialise the default process group from torchrun's variables; a no-op if one exists.

    Under a plain `srun`, torchrun's variables are first filled from SLURM's (`apply_launcher_env`).
    Raises ConfigError when a torchrun variable is missing."""
    if dist.is_initialized():
        return
    apply_launcher_env()
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise ConfigError(
            f"Cannot start torch.distributed: environment variable(s) {', '.join(missing)} not set. "
            "Launch with torchrun or srun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT."
        )
    dist.init_process_group(
        backend=backend,
        init_method="env://",
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        timeout=timeout,
    )


MAIN_ONE_NODE_WORLD = 8
"""Current Nanotron's ParallelContext takes a world of at most this many ranks for one node."""


def check_nodes_fit_nanotron(world_size: int) -> None:
    """Raise ConfigError, on every rank alike, for a world of several nodes that current Nanotron
    (GitHub main) cannot start: its ParallelContext groups a world of at most 8 ranks as one node
    (`local_world_size = world_size`, parallel/context.py) and asserts each LOCAL_RANK is the rank in
    that group, so such a world fails there with "Local rank mismatch" on the later nodes only. With
    `enable_cpu_support()` main's ParallelContext is patched to take the launcher's LOCAL_WORLD_SIZE, and
    this check is not needed."""
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    if world_size > MAIN_ONE_NODE_WORLD or local_world_size == world_size or installed_nanotron().name != "main":
        return
    raise ConfigError(
        f"A world of {world_size} ranks on several nodes ({local_world_size} on this one) cannot start under "
        f"current Nanotron (GitHub main): its ParallelContext treats up to {MAIN_ONE_NODE_WORLD} ranks as one "
        "node. Run on one node, with more than 8 ranks, or with Nanotron 0.4."
    )


def check_layout(tp: int, pp: int, dp: int, world_size: int) -> None:
    """Raise LayoutError unless tp * pp * dp equals the world size (all at least 1)."""
    if min(tp, pp, dp) < 1:
        raise LayoutError(f"Parallel sizes must be >= 1, got tp={tp}, pp={pp}, dp={dp}.")
    if tp * pp * dp != world_size:
        raise LayoutError(
            f"Layout tp={tp} x pp={pp} x dp={dp} = {tp * pp * dp} processes does not match the world size "
            f"{world_size}: launch {tp * pp * dp} processes or change the layout."
        )


def build_parallel_context(
    tp: int, pp: int, dp: int, backend: str = "gloo", timeout: timedelta = DEFAULT_TIMEOUT
) -> "ParallelContext":
    """Build Nanotron's ParallelContext for a (tp, pp, dp) layout, starting the process group if needed.

    Without CUDA, call `enable_cpu_support()` first (ParallelContext selects a CUDA device otherwise).
    TP1/PP1/DP1 in a process that no launcher started (no torchrun or SLURM variables) is a world of
    one on 127.0.0.1: a plain `python script.py` needs no launcher.
    """
    if not torch.cuda.is_available() and not is_cpu_support_enabled():
        raise ConfigError(
            "No CUDA device: call lighteval_nanotron.cpu.enable_cpu_support() before building "
            "a ParallelContext."
        )
    if not dist.is_initialized() and tp * pp * dp == 1:
        apply_launcher_env()
        if not any(name in os.environ for name in TORCHRUN_VARIABLES):
            os.environ.update(local_rank_env(0, 1, free_loopback_port()))
    init_process_group_from_env(backend=backend, timeout=timeout)
    check_layout(tp, pp, dp, dist.get_world_size())
    if not is_cpu_support_enabled():  # on CPU, ParallelContext takes the launcher's node size (cpu/model_patches)
        check_nodes_fit_nanotron(dist.get_world_size())
    import_nanotron()
    from nanotron.parallel import ParallelContext

    return ParallelContext(tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=dp)
