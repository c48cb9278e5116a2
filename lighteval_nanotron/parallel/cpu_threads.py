"""The threads of a CPU rank: how many, and how they wait. Importing this module imports no torch.

**How they wait.** torch's CPU kernels run on GNU OpenMP (libgomp), whose threads, by default,
spin at the end of each parallel region until their partners arrive. When a machine has more
runnable threads than cores (other jobs, several ranks), the partner is often waiting for a core
that the spinning thread holds, so every region lasts a scheduler time slice instead of
microseconds; a rank runs thousands of small regions (decode steps, per-layer matmuls of a few
rows). Measured on the 2-core development machine at load average 4-6, a matmul chain of
SmolLM2-135M's layer shapes with 2 threads (`docs/performance.md`, "Threads on a busy machine"):
4-row (decode) products 75.9 s with the default policy, 1.8 s with `OMP_WAIT_POLICY=PASSIVE`
(waiting threads sleep at once), 1.7 s with one thread. `prefer_passive_wait` sets PASSIVE unless
the user chose a policy; libgomp reads it once, when torch is first imported, so it is called by
the entry points before that (the `lighteval-nanotron` command, the CPU trainer's launcher, the
benchmark's ranks). A process that imported torch earlier keeps the policy it started with.

**How many.** torch takes `OMP_NUM_THREADS` when set (torchrun sets 1 when it starts several
processes and the variable is unset), else every core of the machine, in every process.
`configure_cpu_threads` makes the count explicit: `OMP_NUM_THREADS` when set, else the cores this
process may run on (its CPU affinity) shared by the ranks of this machine (`LOCAL_WORLD_SIZE`), at
least one; and one inter-op thread (the engine runs no inter-op work).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, MutableMapping

WAIT_POLICY = "PASSIVE"


def prefer_passive_wait(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set `OMP_WAIT_POLICY=PASSIVE` unless a policy is set; whether it was set here."""
    if environ.get("OMP_WAIT_POLICY", "").strip():
        return False
    environ["OMP_WAIT_POLICY"] = WAIT_POLICY
    return True


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
