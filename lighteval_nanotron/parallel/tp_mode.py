"""Evaluate a sequence-parallel (REDUCE_SCATTER) model with its TP linears in all-reduce form.

Nanotron's `tp_mode: REDUCE_SCATTER` splits the activations between TP linears along the
sequence over the TP ranks (a column linear all-gathers its input, a row linear and the
embedding reduce-scatter their output). Evaluation needs every position on every TP rank: to
pick the few positions whose logits are read before `lm_head`, and to feed one token per row at
a KV-cache decode step (a sequence of one cannot be split over TP ranks).

`all_reduce_form(model)` switches every TP module of the model (`TensorParallelColumnLinear`,
`TensorParallelRowLinear`, `TensorParallelEmbedding`, `TiedLinear`) to `ALL_REDUCE` without
async communication for the duration of the block, and restores each module's own mode and
flag afterwards, whatever happens inside. The weights are the same shards under both modes and
each output element is the same sum over the TP ranks, so the results are those of the
training's mode; the evaluation costs what it costs under ALL_REDUCE.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch


def _tp_modules(model: torch.nn.Module) -> list[Any]:
    from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

    return [m for m in model.modules() if isinstance(getattr(m, "mode", None), TensorParallelLinearMode)]


def sequence_parallel_modules(model: torch.nn.Module) -> int:
    """How many TP modules of `model` run in REDUCE_SCATTER mode now."""
    return sum(1 for m in _tp_modules(model) if m.mode.name == "REDUCE_SCATTER")


@contextlib.contextmanager
def all_reduce_form(model: torch.nn.Module) -> Iterator[int]:
    """Inside the block every TP module of `model` is in ALL_REDUCE mode, synchronous; yields how
    many modules were switched (0 for an ALL_REDUCE or TP1 model: nothing changes)."""
    from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

    saved = [(m, m.mode, getattr(m, "async_communication", None)) for m in _tp_modules(model)]
    switched = [entry for entry in saved if entry[1] is not TensorParallelLinearMode.ALL_REDUCE]
    try:
        for module, _, async_flag in switched:
            module.mode = TensorParallelLinearMode.ALL_REDUCE
            if async_flag is not None:
                module.async_communication = False
        yield len(switched)
    finally:
        for module, mode, async_flag in switched:
            module.mode = mode
            if async_flag is not None:
                module.async_communication = async_flag
