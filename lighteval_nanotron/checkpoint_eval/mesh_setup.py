"""Start the process group and Nanotron's `ParallelContext` for a checkpoint evaluation, under
torchrun or as a single process, on GPU (NCCL) or CPU (gloo); and make every rank fail together."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import ConfigError, LayoutError

T = TypeVar("T")
_TIMEOUT_HINT = (
    "The eval command waits --failure-timeout-s seconds for every rank at each stage: look in the logs of "
    "the ranks that did not report for where they stopped; raise --failure-timeout-s if it was only slow."
)


def check_world(tp: int, pp: int, dp: int) -> None:
    """Raise LayoutError, on every rank and before any process group exists, unless
    tp x pp x dp is the number of launched processes."""
    if min(tp, pp, dp) < 1:
        raise LayoutError(f"--tp, --pp and --dp must be >= 1, got tp={tp}, pp={pp}, dp={dp}.")
    needed = tp * pp * dp
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if needed == world:
        return
    if "WORLD_SIZE" not in os.environ:
        raise LayoutError(
            f"--tp {tp} --pp {pp} --dp {dp} needs {needed} processes: launch with "
            f"`lighteval-nanotron torchrun --nproc-per-node {needed} eval ...`."
        )
    raise LayoutError(
        f"--tp {tp} x --pp {pp} x --dp {dp} = {needed} processes, but {world} were launched: "
        f"use torchrun --nproc-per-node {needed}, or choose tp/pp/dp whose product is {world}."
    )


@contextlib.contextmanager
def parallel_context_for(tp: int, pp: int, dp: int, cpu: bool) -> Iterator[Any]:
    """Nanotron's ParallelContext for this layout. Under torchrun it joins the launched world;
    a plain `python -m lighteval_nanotron eval ...` is a world of one. A process group started
    here is destroyed on exit, and the environment variables set here are removed."""
    from lighteval_nanotron.parallel.distributed import build_parallel_context, free_loopback_port, local_rank_env
    from lighteval_nanotron.parallel.launch_env import apply_launcher_env

    apply_launcher_env()
    check_world(tp, pp, dp)
    added: dict[str, str] = {}
    if "RANK" not in os.environ:
        defaults = local_rank_env(rank=0, world_size=1, port=free_loopback_port())
        added = {key: value for key, value in defaults.items() if key not in os.environ}
        os.environ.update(added)
    started = not dist.is_initialized()
    try:
        yield build_parallel_context(tp, pp, dp, backend=_prepare_backend(cpu))
    finally:
        if started and dist.is_initialized():
            dist.destroy_process_group()
        for key in added:
            os.environ.pop(key, None)


def _prepare_backend(cpu: bool) -> str:
    if cpu:
        from lighteval_nanotron.cpu import enable_cpu_support
        from lighteval_nanotron.parallel.cpu_threads import configure_cpu_threads

        enable_cpu_support(trainer=False)  # evaluation only: nanotron.trainer stays unimported
        configure_cpu_threads()
        return "gloo"
    if not torch.cuda.is_available():
        raise ConfigError("No CUDA device is visible: pass --cpu to evaluate on CPU with gloo.")
    local, devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1")), torch.cuda.device_count()
    if local > devices:
        raise ConfigError(
            f"{local} processes on this node but {devices} CUDA device(s) visible: start one process per GPU "
            f"(torchrun --nproc-per-node {devices}) with --tp x --pp x --dp to match, or pass --cpu."
        )
    from lighteval_nanotron.nanotron_compat.imports import ensure_cuda_extensions

    ensure_cuda_extensions()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return "nccl"


def collectively(world: Any, what: str, fn: Callable[[], T]) -> T:
    """`fn` on every rank, failing on every rank together (`parallel.agreement.collectively`): a
    rank re-raises its own library error, the others an `EvaluationError` naming the failing rank."""
    from lighteval_nanotron.parallel.agreement import collectively as agreed

    return agreed(world, what, fn, timeout_hint=_TIMEOUT_HINT)
