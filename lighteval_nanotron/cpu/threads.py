"""The intra-op threads of a CPU rank, set explicitly before the model runs.

torch chooses its thread count when it starts: `OMP_NUM_THREADS` when set (torchrun sets 1 when
it starts several processes and the variable is unset), else every core of the machine, in every
process. So a lone `eval --cpu` process on a machine whose cores are shared got as many threads as
the machine has cores whatever its affinity, ranks started another way than torchrun each took
every core (oversubscribed), and a process given 2 threads by its launcher kept the 1 torchrun
chose. `configure_cpu_threads` makes the count explicit: `OMP_NUM_THREADS` when set, else the
cores this process may run on (its CPU affinity) shared by the ranks of this machine
(`LOCAL_WORLD_SIZE`), at least one; and one inter-op thread (the engine runs no inter-op work).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping


def cpu_threads(environ: Mapping[str, str] = os.environ) -> int:
    """Intra-op threads for this rank: `OMP_NUM_THREADS` when set, else the cores of this
    process's affinity divided by the local ranks (`LOCAL_WORLD_SIZE`, default 1), at least 1."""
    if environ.get("OMP_NUM_THREADS", "").strip():
        return max(1, int(environ["OMP_NUM_THREADS"]))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, int(environ.get("LOCAL_WORLD_SIZE", "1"))))


def configure_cpu_threads(environ: Mapping[str, str] = os.environ) -> int:
    """Apply `cpu_threads` to torch (intra-op) and use one inter-op thread; the count set."""
    import torch

    threads = cpu_threads(environ)
    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # allowed only before the first inter-op work of the process
        torch.set_num_interop_threads(1)
    return threads
