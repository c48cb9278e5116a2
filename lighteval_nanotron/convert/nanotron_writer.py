"""Write full Nanotron weights (any family) as a checkpoint folder with Nanotron's own `save_weights`.

The model is built at TP1/PP1/DP1 in a one-process gloo group (an in-memory store, no port), the
weights are copied in and saved; Nanotron's loader reshards such a checkpoint to any layout.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from lighteval_nanotron.checkpoints.format import CheckpointModel
from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model, save_checkpoint_metadata
from lighteval_nanotron.convert.nanotron_files import write_configs
from lighteval_nanotron.cpu import enable_cpu_support
from lighteval_nanotron.errors import CheckpointError, LayoutError

_RANK_ENV = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}


@contextlib.contextmanager
def single_process_context() -> Iterator[Any]:
    """A TP1/PP1/DP1 `ParallelContext`, in a one-process gloo group made here if none exists."""
    enable_cpu_support()
    from nanotron.parallel import ParallelContext

    created = not dist.is_initialized()
    if created:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    elif dist.get_world_size() != 1:
        raise LayoutError(
            f"Conversion runs in one process, but torch.distributed has {dist.get_world_size()} ranks. "
            "Run `lighteval-nanotron convert` without torchrun."
        )
    saved_env = {key: os.environ.get(key) for key in _RANK_ENV}
    os.environ.update(_RANK_ENV)  # ParallelContext reads WORLD_SIZE from the environment
    try:
        yield ParallelContext(tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1)
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key)
            else:
                os.environ[key] = value
        if created:
            dist.destroy_process_group()


@torch.no_grad()
def copy_full_weights(model: torch.nn.Module, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Copy full (name, tensor) pairs into a TP1/PP1 model; every name must come once, shapes must match."""
    targets = model.state_dict()
    seen = set()
    for name, source in weights:
        target = targets.get(name)
        if target is None:
            raise CheckpointError(f"Weight `{name}` has no place in the Nanotron model.")
        if source.shape != target.shape:
            raise CheckpointError(f"`{name}` has shape {tuple(source.shape)}, the model expects {tuple(target.shape)}.")
        target.copy_(source)
        seen.add(name)
    missing = sorted(set(targets) - seen)
    if missing:
        raise CheckpointError(f"The source has no weights for {missing}.")


def write_nanotron_checkpoint(
    folder: Path,
    checkpoint_model: CheckpointModel,
    weights: Iterable[tuple[str, torch.Tensor]],
    dtype: torch.dtype,
) -> int:
    """Write config.yaml, model_config.json, checkpoint_metadata.json and model/ into `folder`.

    `weights` yields full Nanotron weights; it is consumed while the model is filled, so a lazy
    source keeps memory near one copy of the model. Returns the number of parameters.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with single_process_context() as parallel_context:
        from nanotron.serialize.weights import save_weights

        model = build_nanotron_model(checkpoint_model.model_config, parallel_context, dtype, torch.device("cpu"))
        copy_full_weights(model, weights)
        save_weights(model=model, parallel_context=parallel_context, root_folder=folder)
        save_checkpoint_metadata(parallel_context, folder)
        num_parameters = sum(param.numel() for param in model.parameters())
    write_configs(folder, checkpoint_model, dtype)
    return num_parameters
