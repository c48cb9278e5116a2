"""Read a Hugging Face Llama checkpoint folder: `config.json` plus safetensors (single or sharded)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from lighteval_nanotron.errors import CheckpointError

SAFE_INDEX = "model.safetensors.index.json"
SAFE_SINGLE = "model.safetensors"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "generation_config.json",
)


def read_hf_config(folder: Path) -> dict[str, Any]:
    """The folder's `config.json` as a dict."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path} not found: pass a Hugging Face model folder (config.json + *.safetensors).")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path} is not valid JSON ({err}).") from err


def _weight_files(folder: Path) -> list[Path]:
    index = folder / SAFE_INDEX
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"{index} lists shards that are missing: {missing}. Download the whole folder.")
        return files
    if (folder / SAFE_SINGLE).is_file():
        return [folder / SAFE_SINGLE]
    files = sorted(folder.glob("*.safetensors"))
    if files:
        return files
    hint = (
        " (found PyTorch .bin weights: re-save them with safe_serialization=True)" if any(folder.glob("*.bin")) else ""
    )
    raise CheckpointError(f"No *.safetensors weights in {folder}{hint}.")


class SafetensorsWeights(Mapping[str, torch.Tensor]):
    """The folder's safetensors weights (single file or shards), each read from disk when looked up."""

    def __init__(self, folder: Path):
        self._files: dict[str, Path] = {}
        for path in _weight_files(Path(folder)):
            with safe_open(path, framework="pt") as handle:
                self._files.update(dict.fromkeys(handle.keys(), path))

    def __getitem__(self, name: str) -> torch.Tensor:
        with safe_open(self._files[name], framework="pt") as handle:
            return handle.get_tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def tokenizer_files(folder: Path) -> list[Path]:
    """The tokenizer (and generation config) files present in a Hugging Face folder."""
    return [Path(folder) / name for name in TOKENIZER_FILES if (Path(folder) / name).is_file()]
