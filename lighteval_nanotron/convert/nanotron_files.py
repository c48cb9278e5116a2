"""The files of a Nanotron 0.4 checkpoint folder that do not need a model: writing its configs,
reading its raw weights. What the folder holds, and reading its model config, belong to
`lighteval_nanotron.checkpoints.format`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml
from safetensors import safe_open

from lighteval_nanotron.checkpoints.format import (
    MODEL_CONFIG_FILE,
    TRAINING_CONFIG_FILE,
    CheckpointModel,
    weight_files,
)
from lighteval_nanotron.nanotron_compat.imports import import_nanotron


def write_configs(folder: Path, model: CheckpointModel, dtype: torch.dtype) -> None:
    """Write `config.yaml` and `model_config.json` as Nanotron 0.4 does (TP1/PP1/DP1, this folder as init),
    with `rope_theta` in the model config when it is not Nanotron 0.4's default."""
    nanotron_config = import_nanotron()
    folder = Path(folder)
    config = nanotron_config.Config(
        general=nanotron_config.GeneralArgs(project="converted", run=folder.name, seed=42),
        parallelism=nanotron_config.ParallelismArgs(dp=1, pp=1, tp=1),
        model=nanotron_config.ModelArgs(
            model_config=model.model_config,
            init_method=nanotron_config.ExistingCheckpointInit(path=folder),
            dtype=dtype,
        ),
        tokenizer=nanotron_config.TokenizerArgs(tokenizer_name_or_path=str(folder)),
    )
    as_dict = config.as_dict()
    as_dict["model"]["model_config"] = model.config_fields()
    with open(folder / TRAINING_CONFIG_FILE, "w") as out:
        yaml.dump(as_dict, out)
    (folder / MODEL_CONFIG_FILE).write_text(json.dumps(model.config_fields()))


def read_nanotron_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every weight of a Nanotron checkpoint as a full tensor, whatever TP layout wrote it.

    Names are those of `LlamaForTraining.state_dict()`; a tied weight appears once, under the
    name it was saved with.
    """
    import_nanotron()
    from nanotron.serialize.metadata import TensorMetadata

    weights = {}
    for name, paths in weight_files(folder).items():
        full = None
        for path in paths:
            with safe_open(path, framework="pt") as handle:
                data, metadata = handle.get_tensor("data"), handle.metadata()
            if not metadata:
                full = data
                continue
            meta = TensorMetadata.from_str_dict(metadata)
            full = torch.empty(meta.unsharded_shape, dtype=data.dtype) if full is None else full
            for pair in meta.local_global_slices_pairs:
                full[pair.global_slices] = data[pair.local_slices]
        weights[name] = full
    return weights
