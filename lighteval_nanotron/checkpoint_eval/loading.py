"""Read what a checkpoint evaluation needs before any weight moves, beyond the model itself:
the dtype, where the tokenizer is (loaded by `setup.tokenizer`, as the hook's), and that every
checkpoint of a run has one architecture (the model is built once). The model description, the
build and the weight loading are `lighteval_nanotron.checkpoints.format` and
`lighteval_nanotron.checkpoints.nanotron_builder`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from lighteval_nanotron.checkpoints.format import (
    ROPE_INTERLEAVED_KEY,
    CheckpointModel,
    read_checkpoint_dtype,
    training_config_section,
)
from lighteval_nanotron.errors import CheckpointError, ConfigError
from lighteval_nanotron.models.families.base import ROPE_THETA_KEY
from lighteval_nanotron.options.checkpoint_eval import DTYPES as DTYPE_NAMES

logger = logging.getLogger(__name__)

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def _compared_fields(model: CheckpointModel) -> dict:
    """The recorded fields and the RoPE settings (carried, or the config's where its class has them)."""
    return {**model.config_fields(), ROPE_THETA_KEY: model.rope_theta, ROPE_INTERLEAVED_KEY: model.rope_interleaved}


def check_same_model(reference: CheckpointModel, model: CheckpointModel, path: Path) -> None:
    """Every checkpoint of one run must have the architecture of the first (the model is built once)."""
    if model != reference:
        expected, found = _compared_fields(reference), _compared_fields(model)
        changed = sorted(key for key in set(expected) | set(found) if expected.get(key) != found.get(key))
        raise CheckpointError(
            f"Checkpoint {path} has a different model config from the first checkpoint ({', '.join(changed)}): "
            "evaluate checkpoints of one architecture per run."
        )


def resolve_dtype(name: str | None, path: str | Path) -> torch.dtype:
    """`--dtype` when given, else config.yaml's `model.dtype`, else float32."""
    if name is not None:
        if name not in DTYPES:
            raise ConfigError(f"Unknown dtype {name!r}: choose one of {', '.join(DTYPES)}.")
        return DTYPES[name]
    try:
        return read_checkpoint_dtype(path) or torch.float32
    except CheckpointError as error:
        raise CheckpointError(f"{error} Pass --dtype {'|'.join(DTYPES)}.") from error


def _has_tokenizer_files(folder: Path) -> bool:
    return folder.is_dir() and any((folder / name).is_file() for name in TOKENIZER_FILES)


def tokenizer_source(explicit: str | None, checkpoint: Path) -> str:
    """Where the tokenizer comes from: `explicit`, else the checkpoint folder when it holds
    tokenizer files, else config.yaml's `tokenizer.tokenizer_name_or_path`."""
    if explicit:
        return explicit
    if _has_tokenizer_files(checkpoint):
        return str(checkpoint)
    configured = training_config_section(checkpoint, "tokenizer").get("tokenizer_name_or_path")
    if configured:
        checkpoints_path = training_config_section(checkpoint, "checkpoints").get("checkpoints_path")
        return resolve_tokenizer_path(str(configured), checkpoint, checkpoints_path)
    raise ConfigError(
        f"No tokenizer for checkpoint {checkpoint}: it holds no tokenizer files and its config.yaml names none "
        "(tokenizer.tokenizer_name_or_path). Pass --tokenizer PATH_OR_NAME."
    )


def resolve_tokenizer_path(configured: str, checkpoint: Path, checkpoints_path: str | None = None) -> str:
    """A relative `tokenizer_name_or_path` is relative to the training's working directory, not to
    ours: find it there (the folder that `checkpoints.checkpoints_path` was relative to, then each
    folder above the checkpoint). Returned unchanged when it is absolute, found from here, or found
    nowhere (then it may be a Hub name)."""
    path = Path(configured).expanduser()
    if path.is_absolute() or _has_tokenizer_files(path):
        return configured
    for root in _training_roots(checkpoint, checkpoints_path):
        if _has_tokenizer_files(root / path):
            return str(root / path)
    return configured


def _training_roots(checkpoint: Path, checkpoints_path: str | None) -> list[Path]:
    """Where the training may have run: the folder `checkpoints_path` is relative to, then every ancestor."""
    checkpoint = checkpoint.resolve()
    roots: list[Path] = []
    if checkpoints_path and not Path(checkpoints_path).is_absolute():
        parts = Path(checkpoints_path).parts
        run_folder = checkpoint.parent
        if len(run_folder.parts) > len(parts) and run_folder.parts[-len(parts) :] == parts:
            roots.append(Path(*run_folder.parts[: -len(parts)]))
    roots += [folder for folder in checkpoint.parents if folder not in roots]
    return roots
