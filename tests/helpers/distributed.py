"""Run a function on N gloo processes on this machine; fail (never hang) if any rank fails.

    from tests.helpers.distributed import run_distributed, parallel_context

    def _check(tp, pp, dp):              # module-level, so it can be pickled
        ctx = parallel_context(tp, pp, dp)
        return dist.get_rank(ctx.tp_pg)

    assert run_distributed(_check, 4, 2, 2, 1, timeout=60) == [0, 1, 0, 1]

Each rank runs in a process forked from a server that has Nanotron already imported (fast
starts), with RANK/WORLD_SIZE/MASTER_* set, OMP_NUM_THREADS=1, WANDB_MODE=disabled (unless
set), `enable_cpu_support()` called and the default gloo group started on 127.0.0.1 at a free
port. The group is always destroyed.
"""

import multiprocessing
import os
import pickle
import queue
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch

from lighteval_nanotron.parallel.distributed import free_loopback_port, local_rank_env

PRELOAD_MODULE = "tests.helpers._preload"
LAYOUTS: Sequence[Tuple[int, int, int]] = ((1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1), (1, 1, 2))
"""(tp, pp, dp) layouts exercised by the model tests: TP1/PP1, TP2, PP2, TP2xPP2 and DP2."""


class DistributedRunError(AssertionError):
    """A rank raised, died, or the run passed its timeout."""


def _context() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([PRELOAD_MODULE])
    return context


def _worker(rank: int, world_size: int, port: int, timeout_s: float, fn: Callable, args: tuple, results) -> None:
    os.environ.update(local_rank_env(rank, world_size, port), OMP_NUM_THREADS="1")
    os.environ.setdefault("WANDB_MODE", "disabled")  # Nanotron's trainer calls wandb.init when wandb is installed
    torch.set_num_threads(1)
    import torch.distributed as dist

    from lighteval_nanotron.cpu import enable_cpu_support
    from lighteval_nanotron.parallel.distributed import init_process_group_from_env

    try:
        enable_cpu_support()
        init_process_group_from_env(backend="gloo", timeout=timedelta(seconds=timeout_s))
        results.put((rank, True, pickle.dumps(fn(*args))))
    except BaseException:  # report everything, KeyboardInterrupt included, then exit
        results.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _tag(rank: int, text: str) -> str:
    return "\n".join(f"[rank {rank}] {line}" for line in text.rstrip().splitlines())


def run_distributed(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 120.0) -> List[Any]:
    """Run `fn(*args)` on `world_size` gloo ranks; return the per-rank return values (rank order).

    `fn` and its return value must be picklable (define `fn` at module level). Raises
    DistributedRunError with rank-tagged tracebacks as soon as one rank raises or dies, or when
    `timeout` seconds pass; the remaining processes are killed.
    """
    context = _context()
    results = context.Queue()
    port = free_loopback_port()
    processes = [
        context.Process(target=_worker, args=(rank, world_size, port, timeout, fn, args, results), daemon=True)
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    try:
        values, errors = _collect(processes, results, time.monotonic() + timeout, timeout)
    finally:
        _stop(processes)
    if errors:
        details = "\n".join(_tag(rank, errors[rank]) for rank in sorted(errors))
        raise DistributedRunError(f"{len(errors)} of {world_size} rank(s) failed running {fn.__name__}:\n{details}")
    return [pickle.loads(values[rank]) for rank in range(world_size)]


def _collect(processes, results, deadline: float, timeout: float) -> Tuple[Dict[int, bytes], Dict[int, str]]:
    values: Dict[int, bytes] = {}
    errors: Dict[int, str] = {}
    silent_since: Dict[int, float] = {}
    while len(values) < len(processes):
        try:
            rank, ok, payload = results.get(timeout=0.1)
        except queue.Empty:
            now = time.monotonic()
            for rank, process in enumerate(processes):
                if rank in values or process.exitcode is None:
                    continue
                # A result put just before exit may still be in flight: allow it a moment.
                if now - silent_since.setdefault(rank, now) > 2.0:
                    errors[rank] = f"process exited with code {process.exitcode} without returning a result"
            if errors:
                return values, errors
            if now > deadline:
                waiting = [rank for rank in range(len(processes)) if rank not in values]
                errors.update({rank: f"timed out after {timeout:.0f} s (no result)" for rank in waiting})
                return values, errors
            continue
        if not ok:
            errors[rank] = payload
            return values, errors
        values[rank] = payload
    return values, errors


def _stop(processes) -> None:
    for process in processes:
        process.join(timeout=0.5 if process.exitcode is None else 5)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)


def parallel_context(tp: int, pp: int, dp: int):
    """Nanotron ParallelContext for (tp, pp, dp) inside a `run_distributed` rank."""
    from lighteval_nanotron.parallel.distributed import build_parallel_context

    return build_parallel_context(tp, pp, dp)
