"""Prove that a checkpoint's files hold every weight of the model, whole, before any is loaded.

Nanotron's loader reshards by reading whatever shard files it finds next to a parameter's path:
a missing `..._tp-rank-1-of-2.safetensors` leaves part of the parameter uninitialised, and files
of layers the model config does not have (4-layer weights under a 3-layer config) are ignored.
Both evaluate a wrong model without a word. This module reads the file names and safetensors
headers only and refuses, naming the files, unless

- every weight the model expects has files, and no saved weight is unknown to the model;
- the shards of each weight are all there (`tp-rank-0..M-1-of-M` for one M per pipeline stage),
  their global slices cover the full (unsharded) shape exactly once;
- each saved full shape is the model's (so the config's sizes describe these weights), and each
  file holds floating-point data (an integer shard of the right shape would be cast silently);
- `model_config.json` and `config.yaml`'s `model.model_config`, when both exist, agree (a head
  count can change without changing any shape).

    problems = integrity_problems("ckpt/10", {"model.decoder.0.pp_block.attn.qkv_proj.weight": (128, 64), ...})
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from itertools import combinations
from pathlib import Path
from typing import Any

import torch

from lighteval_nanotron.checkpoints.format import (
    MODEL_CONFIG_FILE,
    TRAINING_CONFIG_FILE,
    WEIGHTS_FOLDER,
    training_config_section,
    weight_files,
)
from lighteval_nanotron.errors import CheckpointError

_SHARD_SUFFIX = re.compile(
    r"_pp-rank-(?P<pp>\d+)-of-(?P<pp_size>\d+)_tp-rank-(?P<tp>\d+)-of-(?P<tp_size>\d+)\.safetensors$"
)
_MAX_LISTED = 8
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
"""safetensors dtypes a weight may be saved in (the model is built in a floating-point dtype)."""


def _header(file: Path) -> tuple[tuple[int, ...], list[tuple[slice, ...]] | None, str]:
    """(full shape, global slices of each local piece or None for an unsharded file, safetensors dtype)."""
    from nanotron.serialize.metadata import TensorMetadata
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        metadata = handle.metadata()
        data = handle.get_slice("data")
        if metadata and "unsharded_shape" in metadata:
            parsed = TensorMetadata.from_str_dict(metadata)
            slices = [pair.global_slices for pair in parsed.local_global_slices_pairs]
            return tuple(parsed.unsharded_shape), slices, data.get_dtype()
        return tuple(data.get_shape()), None, data.get_dtype()


def _ranges(slices: tuple[slice, ...], shape: tuple[int, ...]) -> list[range]:
    return [range(*piece.indices(size)) for piece, size in zip(slices, shape, strict=True)]


def _ranges_meet(first: range, second: range) -> bool:
    if first.step == second.step == 1:
        return max(first.start, second.start) < min(first.stop, second.stop)
    return bool(set(first) & set(second))


def _coverage_problem(
    name: str, files: list[Path], shape: tuple[int, ...], pieces: list[tuple[Path, list[range]]]
) -> str | None:
    """None when the pieces tile `shape` exactly; else what is wrong."""
    total = sum(math.prod(len(r) for r in ranges) for _, ranges in pieces)
    for (file_a, a), (file_b, b) in combinations(pieces, 2):
        if all(_ranges_meet(x, y) for x, y in zip(a, b, strict=True)):
            return f"{name}: shards {file_a.name} and {file_b.name} overlap"
    if total != math.prod(shape):
        found = ", ".join(file.name for file in files)
        full = math.prod(shape)
        return f"{name}: its shard files ({found}) cover {total} of the {full} values of its full shape {shape}"
    return None


def _shard_set_problem(name: str, files: list[Path]) -> str | None:
    """Every pipeline stage that saved this weight must have all of its TP ranks' files."""
    ranks: dict[tuple[int, int], dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for file in files:
        match = _SHARD_SUFFIX.search(file.name)
        if match is not None:
            ranks[(int(match["pp"]), int(match["pp_size"]))][int(match["tp_size"])].add(int(match["tp"]))
    for (pp, pp_size), by_size in sorted(ranks.items()):
        if len(by_size) > 1:
            return f"{name}: pipeline stage {pp} of {pp_size} has shards of several TP sizes ({sorted(by_size)})"
        ((tp_size, present),) = by_size.items()
        missing = sorted(set(range(tp_size)) - present)
        if missing:
            folder = files[0].parent
            stem = f"{folder}/model_{name.rsplit('.', 1)[-1]}_pp-rank-{pp}-of-{pp_size}"
            names = ", ".join(f"{stem}_tp-rank-{t}-of-{tp_size}.safetensors" for t in missing)
            return f"{name}: missing shard file(s) {names}"
    return None


def _weight_problems(name: str, files: list[Path], expected: tuple[int, ...]) -> list[str]:
    headers = [(file, *_header(file)) for file in files]
    not_float = [f"{file.name} holds {dtype}" for file, _, _, dtype in headers if dtype not in FLOAT_DTYPES]
    if not_float:
        return [
            f"{name}: {', '.join(not_float)} data, not floating point ({'/'.join(FLOAT_DTYPES)}); loading would "
            "cast it to the model's dtype without a word"
        ]
    shapes = {shape for _, shape, _, _ in headers}
    if len(shapes) > 1:
        return [f"{name}: its shard files disagree on the full shape ({sorted(shapes)})"]
    (shape,) = shapes
    if shape != tuple(expected):
        return [f"{name}: saved with full shape {shape}, but its model config gives {tuple(expected)}"]
    sharded = [(file, slices) for file, _, slices, _ in headers if slices is not None]
    if not sharded:
        return [] if len(files) == 1 else [f"{name}: {len(files)} unsharded files ({', '.join(f.name for f in files)})"]
    problem = _shard_set_problem(name, files) or _coverage_problem(
        name, files, shape, [(file, _ranges(piece, shape)) for file, slices in sharded for piece in slices]
    )
    return [] if problem is None else [problem]


def _config_problems(path: Path) -> list[str]:
    json_file = path / MODEL_CONFIG_FILE
    yaml_section = training_config_section(path, "model").get("model_config")
    if not json_file.is_file() or not isinstance(yaml_section, dict):
        return []
    try:
        recorded = json.loads(json_file.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return []  # reported by read_checkpoint_model, with its own fix
    if not isinstance(recorded, dict):
        return []
    differing = sorted(k for k in set(recorded) & set(yaml_section) if recorded[k] != yaml_section[k])
    if not differing:
        return []
    values = ", ".join(f"{key}={recorded[key]!r} vs {yaml_section[key]!r}" for key in differing)
    return [f"{MODEL_CONFIG_FILE} and {TRAINING_CONFIG_FILE} (model.model_config) disagree: {values}"]


def integrity_problems(path: str | Path, expected_shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """What keeps the checkpoint at `path` from holding exactly the weights `expected_shapes`
    names (`{parameter name as saved: full shape}`, the whole model, every stage); [] when sound."""
    path = Path(path)
    saved = weight_files(path)
    problems = _config_problems(path)
    missing = sorted(set(expected_shapes) - set(saved))
    if missing:
        problems.append(f"no file for {len(missing)} weight(s) of the model: {_listed(missing)}")
    unknown = sorted(set(saved) - set(expected_shapes))
    if unknown:
        problems.append(
            f"{len(unknown)} saved weight(s) that the model config does not have (more layers or other sizes "
            f"than {MODEL_CONFIG_FILE} says?): {_listed(unknown)}"
        )
    for name in sorted(set(saved) & set(expected_shapes)):
        problems.extend(_weight_problems(name, saved[name], expected_shapes[name]))
    return problems


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")


def check_checkpoint_integrity(path: str | Path, expected_shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Raise CheckpointError listing every problem `integrity_problems` finds."""
    problems = integrity_problems(path, expected_shapes)
    if problems:
        raise CheckpointError(
            f"Checkpoint {path} does not hold the model its config describes, so it is not loaded: "
            + "; ".join(problems)
            + f". Re-copy the missing files from where the checkpoint was saved (every file under {WEIGHTS_FOLDER}/), "
            "or fix the model config to describe these weights."
        )


def model_weight_shapes(model: torch.nn.Module, world_group: Any) -> dict[str, tuple[int, ...]]:
    """`{name as saved: full shape}` of every weight of a built Nanotron model, all pipeline
    stages (gathered over `world_group`; collective). Tied weights count once, under the name
    Nanotron saves them by."""
    import torch.distributed as dist
    from nanotron.parallel.parameters import NanotronParameter

    prefixes = {id(module): f"{name}." for name, module in model.named_modules()}
    prefixes[id(model)] = ""
    local: dict[str, tuple[int, ...]] = {}
    for name, param in model.named_parameters():
        if isinstance(param, NanotronParameter) and param.is_tied:
            name = param.get_tied_info().get_full_name_from_module_id_to_prefix(module_id_to_prefix=prefixes)
        sharded = isinstance(param, NanotronParameter) and param.is_sharded
        local[name] = tuple(param.get_sharded_info().unsharded_shape if sharded else param.shape)
    gathered: list = [None] * dist.get_world_size(world_group)
    dist.all_gather_object(gathered, local, group=world_group)
    return {name: shape for part in gathered for name, shape in part.items()}
