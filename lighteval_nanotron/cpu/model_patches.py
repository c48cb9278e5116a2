"""Patches that let Nanotron's models (0.4, or current GitHub main) build and run on CPU (see docs/cpu.md).

Nanotron's `ParallelContext.set_device` and the decoding helpers need CUDA whatever the model; what
each model family needs (its pipeline P2P, rotary tables, ...) is declared in its folder
(`models/families/<family>/cpu_needs.py`) and applied here for every family the installed Nanotron has.

Current Nanotron (GitHub main) also gets: its `MemoryBuffer` (the all-gather buffer of the
sequence-parallel TP linears, `tp_mode: REDUCE_SCATTER`) allocated on the CPU instead of
`torch.cuda.current_device()` (parallel/utils.py:25); and its `ParallelContext` told the node size
the launcher gives (`LOCAL_WORLD_SIZE`): main takes the whole world as one node when it has at most
8 processes (parallel/context.py:24), so a run over two nodes with 8 or fewer processes in all fails
its "Local rank mismatch" assert (context.py:73) on the second node. And gloo's reduce-scatter wants
the input's first dimension to be world size x the output's (NCCL only compares sizes), while main's
sequence-parallel column linear hands a 2-D gradient for a 3-D output of the same size
(tensor_parallel/functional.py:528-541): the input is viewed in the output's shape, which is the
same flat reduce-scatter.

Each patch replaces one attribute and records the original in `ORIGINALS`, so that applying it
twice is a no-op and tests can check what is active. Import this module only after
`import_nanotron()` (it imports Nanotron).
"""

import functools
import math
import os
from typing import Any, Dict, Tuple

import torch
from nanotron.generation import decode
from nanotron.parallel.context import ParallelContext

from lighteval_nanotron.cpu.devices import on_cpu
from lighteval_nanotron.cpu.p2p import CpuP2P
from lighteval_nanotron.models.families import CpuNeeds, available_families
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron

ORIGINALS: Dict[Tuple[Any, str], Any] = {}


def replace(owner: Any, name: str, value: Any) -> None:
    """Set `owner.name = value` once, remembering the original."""
    if (owner, name) in ORIGINALS:
        return
    ORIGINALS[(owner, name)] = getattr(owner, name)
    setattr(owner, name, value)


def _set_device_noop(self: ParallelContext) -> None:
    """ParallelContext.set_device on CPU: there is no device to select."""


def apply_model_patches() -> None:
    """Device placement of the models, their pipeline P2P and decoding helpers."""
    replace(ParallelContext, "set_device", _set_device_noop)
    replace(decode, "micro_batcher", on_cpu(decode.micro_batcher))
    replace(decode, "micro_splitter", on_cpu(decode.micro_splitter))
    replace(decode, "broadcast_tensors", on_cpu(decode.broadcast_tensors))
    if installed_nanotron().name == "main":
        apply_main_patches()
    for family in available_families():
        apply_family_needs(family.cpu_needs())
    if not torch.cuda.is_available():
        replace(torch.cuda, "synchronize", _noop)
        replace(torch.cuda, "reset_peak_memory_stats", _noop)


def apply_main_patches() -> None:
    """Current Nanotron's TP all-gather buffer on the CPU, its reduce-scatters in gloo's shapes, its node size
    from the launcher."""
    from nanotron import distributed
    from nanotron.parallel.utils import MemoryBuffer

    replace(MemoryBuffer, "get", _memory_buffer_get_cpu)
    replace(distributed, "reduce_scatter_tensor", _in_output_shape(distributed.reduce_scatter_tensor))
    replace(ParallelContext, "_init_parallel_groups", _with_launcher_node_size(ParallelContext._init_parallel_groups))


def _memory_buffer_get_cpu(self: Any, name: str, shape: Tuple[int, ...], dtype: torch.dtype = torch.bfloat16):
    """main's `MemoryBuffer.get` (parallel/utils.py:21-27): a reused buffer per (name, dtype), on the CPU."""
    numel = math.prod(shape)
    if (name, dtype) not in self.buffer or self.buffer[name, dtype].numel() < numel:
        self.buffer[name, dtype] = torch.empty(numel, dtype=dtype, requires_grad=False)
    return self.buffer[name, dtype][:numel].view(shape)


def _in_output_shape(reduce_scatter_tensor):
    """main's `reduce_scatter_tensor` with an input of the right size viewed as world size x the output's shape."""

    @functools.wraps(reduce_scatter_tensor)
    def wrapper(output, input, op=torch.distributed.ReduceOp.SUM, group=None, async_op=False):
        world = group.size() if group is not None else torch.distributed.get_world_size()
        if input.shape[0] != world * output.shape[0] and input.numel() == world * output.numel():
            input = input.reshape(world * output.shape[0], *output.shape[1:])
        return reduce_scatter_tensor(output=output, input=input, op=op, group=group, async_op=async_op)

    return wrapper


def _with_launcher_node_size(init_parallel_groups):
    """main's `ParallelContext._init_parallel_groups` with `local_world_size` from LOCAL_WORLD_SIZE, when set."""

    @functools.wraps(init_parallel_groups)
    def wrapper(self: ParallelContext) -> None:
        if os.environ.get("LOCAL_WORLD_SIZE"):
            self.local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
        return init_parallel_groups(self)

    return wrapper


def apply_family_needs(needs: CpuNeeds) -> None:
    """A family's CPU needs (`ModelFamily.cpu_needs`), except those of the trainer."""
    for module in needs.p2p_modules:
        replace(module, "P2P", CpuP2P)
    for owner, name in needs.run_on_cpu:
        replace(owner, name, on_cpu(getattr(owner, name)))
    for owner, name, value in needs.replaced:
        replace(owner, name, value)


def _noop(*args: Any, **kwargs: Any) -> None:
    """Stands in for a `torch.cuda` call that CPU-only torch cannot make."""
