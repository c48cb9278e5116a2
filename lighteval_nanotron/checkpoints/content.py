"""A cheap sanity check of a checkpoint's weight values, before they are loaded: what no trained (or
freshly initialised) model holds is refused with the weight and the file named.

- NaN or inf anywhere;
- a matrix (2 or more dimensions: a projection, an embedding, an expert) whose every value is the
  same, zeros included: initialisation draws its values at random and training moves each on
  its own, so a constant one is a file whose data region was overwritten or never written;
- a vector other than a bias (a norm's weight) that is all zeros: it silences its layer. A norm
  weight of ones and a bias of zeros are what initialisation leaves, so constant vectors are
  otherwise accepted.

Each file is read once by one rank (files dealt round-robin over the world group) in chunks, and
the problems are gathered, so every rank raises the same CheckpointError together; the headers'
checks (`integrity`) come first.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from lighteval_nanotron.checkpoints.format import weight_files
from lighteval_nanotron.errors import CheckpointError

_CHUNK = 1 << 24  # values per chunk: no temporary larger than 16M booleans


def _values_problem(name: str, file: Path, tensor: torch.Tensor) -> str | None:
    flat = tensor.reshape(-1)
    non_finite, low, high = 0, None, None
    for chunk in flat.split(_CHUNK):
        finite = torch.isfinite(chunk)
        non_finite += int(chunk.numel() - finite.sum())
        if non_finite == 0:
            low = chunk.min() if low is None else torch.minimum(low, chunk.min())
            high = chunk.max() if high is None else torch.maximum(high, chunk.max())
    if non_finite:
        return f"{name}: {file.name} holds {non_finite} NaN/inf value(s) of {flat.numel()}"
    if flat.numel() < 2 or low != high:
        return None
    value = float(low)
    if tensor.dim() >= 2:
        return f"{name}: every one of the {flat.numel()} values of {file.name} is {value:g} (a constant matrix)"
    if value == 0.0 and not name.endswith("bias"):
        return f"{name}: {file.name} is all zeros (a norm weight at zero silences its layer)"
    return None


def file_problems(named_files: Iterable[tuple[str, Path]]) -> list[str]:
    """The content problems of each `(weight name, safetensors file)`; [] when all look trained."""
    from safetensors import safe_open

    problems = []
    for name, file in named_files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                tensor = handle.get_tensor("data")
        except Exception as error:  # noqa: BLE001 - a damaged file is a problem to report, on every rank
            problems.append(f"{name}: {file.name} cannot be read ({type(error).__name__}: {error})")
            continue
        if tensor.is_floating_point():
            problem = _values_problem(name, file, tensor)
            if problem is not None:
                problems.append(problem)
    return problems


def check_weight_content(path: str | Path, world_group: Any = None) -> None:
    """Raise CheckpointError listing the weights whose values no trained model has. Collective over
    `world_group` (None: this process checks every file)."""
    import torch.distributed as dist

    named = sorted((name, file) for name, files in weight_files(path).items() for file in files)
    if world_group is None:
        problems = file_problems(named)
    else:
        rank, size = dist.get_rank(world_group), dist.get_world_size(world_group)
        gathered: list[Any] = [None] * size
        dist.all_gather_object(gathered, file_problems(named[rank::size]), group=world_group)
        problems = sorted(problem for part in gathered for problem in part)
    if problems:
        raise CheckpointError(
            f"Checkpoint {path} holds weights no trained model has, so it is not evaluated: "
            + "; ".join(problems)
            + ". The files were probably damaged (an interrupted copy, a full disk): re-copy them from where the "
            "checkpoint was saved."
        )
