"""Build a Nanotron training model (any supported family) on a `ParallelContext`, save it, load a checkpoint.

The model config's class picks the family (`models.families`: `LlamaConfig` -> `LlamaForTraining`,
`Starcoder2Config` -> `Starcoder2ForTraining`); a config no family supports, or an option the
engine cannot run, raises UnsupportedModelError before anything is built.

What a checkpoint folder holds is read by `checkpoints.format`. Nanotron's `load_weights` reshards on
load, so a checkpoint saved at one TP/PP/DP layout loads at any other that fits the model; the saved
shapes are checked against the model config first, since the loader would slice a mismatched
tensor without a word. On CPU call `enable_cpu_support()` first.

    model, model_config = load_nanotron_checkpoint("ckpt/10", parallel_context)
"""

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
import torch.distributed as dist

from lighteval_nanotron.checkpoints.content import check_weight_content
from lighteval_nanotron.checkpoints.format import (
    CONVERTED_STAGE,
    MODEL_CONFIG_FILE,
    ROPE_INTERLEAVED_KEY,
    TRAINING_CONFIG_FILE,
    CheckpointModel,
    check_complete_checkpoint,
    read_checkpoint_dtype,
    read_checkpoint_model,
    saved_weight_shapes,
)
from lighteval_nanotron.checkpoints.integrity import check_checkpoint_integrity, model_weight_shapes
from lighteval_nanotron.checkpoints.no_init import random_init_skipped
from lighteval_nanotron.errors import CheckpointError, LayoutError, UnsupportedModelError
from lighteval_nanotron.models.families import family_of_config
from lighteval_nanotron.models.families.base import DEFAULT_ROPE_THETA, ROPE_THETA_KEY
from lighteval_nanotron.nanotron_compat.console import quiet_nanotron
from lighteval_nanotron.nanotron_compat.imports import import_nanotron, import_nanotron_models
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron
from lighteval_nanotron.parallel.device import default_device

if TYPE_CHECKING:
    from nanotron.config import ParallelismArgs
    from nanotron.models import NanotronModel
    from nanotron.parallel import ParallelContext


def check_model_layout(model_config: Any, tp: int, pp: int) -> None:
    """Raise LayoutError, naming the fix, when the model cannot be split tp ways and into pp stages."""
    family = family_of_config(model_config)
    for name, value in family.layout_sizes(model_config).items():
        if value % tp:
            raise LayoutError(f"TP={tp} does not divide the model's {name}={value}: choose a TP size that divides it.")
    if model_config.hidden_size % model_config.num_attention_heads:
        raise LayoutError(
            f"hidden_size={model_config.hidden_size} is not a multiple of "
            f"num_attention_heads={model_config.num_attention_heads}: the model config is invalid."
        )
    if pp > family.num_layers(model_config):
        raise LayoutError(
            f"PP={pp} is larger than the model's num_hidden_layers={family.num_layers(model_config)}: "
            "use at most one pipeline stage per layer."
        )


def build_nanotron_model(
    model_config: Any,
    parallel_context: "ParallelContext",
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
    parallel_config: Optional["ParallelismArgs"] = None,
    rope_theta: float = DEFAULT_ROPE_THETA,
    carried: Optional[dict[str, Any]] = None,
    random_init: bool = True,
) -> "NanotronModel":
    """Build the (uninitialised) training model of `model_config`'s family, sharded over
    `parallel_context`, ties marked. With `random_init=False` the modules' random initial draws
    are skipped (`no_init`): only for a model whose every weight is loaded next.

    `parallel_config` defaults to the context's sizes with TP all-reduce and no async TP
    communication. `device` defaults to the CPU when CPU support is on or there is no CUDA.
    `carried` are the fields a checkpoint records beside a config class that lacks them
    (`CheckpointModel.carried`: `rope_theta`, `rope_interleaved` for 0.4's Llama); `rope_theta`
    alone is the same as `carried={"rope_theta": ...}`. Raises UnsupportedModelError for a config the engine cannot
    run, LayoutError when the layout does not fit the model.
    """
    tp, pp, dp = (parallel_context.tp_pg.size(), parallel_context.pp_pg.size(), parallel_context.dp_pg.size())
    family = family_of_config(model_config)
    family.check_config(model_config)
    check_model_layout(model_config, tp, pp)
    import_nanotron_models()  # flash-attn (or its stand-in) importable: Nanotron's models import it
    from nanotron.config import ParallelismArgs
    from nanotron.models import build_model
    from nanotron.trainer import mark_tied_parameters

    if parallel_config is None:
        parallel_config = ParallelismArgs(dp=dp, pp=pp, tp=tp)
    training_class = family.training_class()
    with contextlib.nullcontext() if random_init else random_init_skipped():
        model = build_model(
            model_builder=lambda: _instantiate(training_class, model_config, parallel_context, parallel_config),
            parallel_context=parallel_context,
            dtype=dtype,
            device=device if device is not None else default_device(),
        )
    mark_tied_parameters(model=model, parallel_context=parallel_context, parallel_config=parallel_config)
    carried = {**({ROPE_THETA_KEY: rope_theta} if rope_theta != DEFAULT_ROPE_THETA else {}), **(carried or {})}
    if carried:
        family.apply_carried(model, carried)
    recorded = CheckpointModel(model_config, carried.get(ROPE_THETA_KEY, DEFAULT_ROPE_THETA),
                               carried.get(ROPE_INTERLEAVED_KEY, True))  # fmt: skip
    check_built_rotary(model, recorded)
    return model


def check_built_rotary(model: "NanotronModel", recorded: CheckpointModel) -> None:
    """Raise UnsupportedModelError when a built decoder layer of this rank rotates q/k otherwise than
    the weights are laid out for (`CheckpointModel.rotary_layout`): the engine applies the built
    layer's rotary (the family's layer view), so a mismatch would score every document wrong."""
    expected = recorded.rotary_layout
    if expected is None:
        return
    family = recorded.family
    try:
        steps = family.chain(family.inner_model(model))
    except UnsupportedModelError:
        return  # a model the engine cannot run at all (Qwen2 at EP > 1): refused at the engine's setup, naming why
    for step in steps:
        module = getattr(step.block, "pp_block", None)  # built on the block's own PP rank only
        rotary = family.decoder_layer(module).rotary if step.kind == "layer" and module is not None else None
        if rotary is not None and (float(rotary.base), bool(rotary.interleaved)) != expected:
            raise UnsupportedModelError(
                f"The installed Nanotron built {family.name} layer {step.layer_index} with RoPE (base, interleaved) "
                f"= {(float(rotary.base), bool(rotary.interleaved))}, but the model config records {expected}: "
                "it would score every document wrong, so it is not evaluated. Use a Nanotron listed in "
                "docs/engine.md ('Nanotron versions')."
            )


def _instantiate(training_class: type, model_config: Any, parallel_context: Any, parallel_config: Any) -> Any:
    """`training_class(...)`. Only dropout in training mode draws from its random states, which
    the engine never runs (the trainer builds its own, TP-synced), so this process's state serves."""
    from nanotron.random import RandomStates, get_current_random_state

    random_states = RandomStates({"tp_synced": get_current_random_state()})
    return training_class(
        config=model_config,
        parallel_context=parallel_context,
        parallel_config=parallel_config,
        random_states=random_states,
    )


def save_nanotron_checkpoint(
    model: "NanotronModel",
    model_config: Any,
    parallel_context: "ParallelContext",
    path: Union[str, Path],
    training_config: Any | None = None,
) -> Path:
    """Save the model's weights as a Nanotron checkpoint; every rank must call it.

    Writes `model/`, `checkpoint_metadata.json`, `model_config.json` and, when a Nanotron
    `Config` is given, `config.yaml`. Returns the folder.
    """
    import_nanotron()
    from nanotron.serialize.weights import save_weights

    quiet_nanotron()  # its weight bars: on a terminal only

    root = Path(path)
    if dist.get_rank(parallel_context.world_pg) == 0:
        root.mkdir(parents=True, exist_ok=True)
    dist.barrier(parallel_context.world_pg)
    save_weights(model=model, parallel_context=parallel_context, root_folder=root)
    save_checkpoint_metadata(parallel_context, root)
    if dist.get_rank(parallel_context.world_pg) == 0:
        (root / MODEL_CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(model_config), indent=2))
        if training_config is not None:
            training_config.save_as_yaml(root / TRAINING_CONFIG_FILE)
    dist.barrier(parallel_context.world_pg)
    return root


def save_checkpoint_metadata(parallel_context: "ParallelContext", root: Path) -> None:
    """Nanotron's `checkpoint_metadata.json` for weights not produced by training (step 0): 0.4 takes
    a free-form dict, current Nanotron (GitHub main) a `TrainingMetadata` with its data stages."""
    import_nanotron()
    from nanotron.serialize.metadata import save_meta

    if installed_nanotron().name != "main":
        save_meta(parallel_context=parallel_context, root_folder=root, checkpoint_metadata={})
        return
    from nanotron.serialize.metadata import DataStageMetadata, TrainingMetadata

    stage = DataStageMetadata(name=CONVERTED_STAGE, start_training_step=1, consumed_train_samples=0)
    metadata = TrainingMetadata(consumed_train_samples=0, last_train_step=0, consumed_tokens_total=0,
                                last_stage_idx=0, data_stages=[stage])  # fmt: skip
    save_meta(parallel_context=parallel_context, root_folder=root, training_metadata=metadata)


def check_weight_shapes(model: "NanotronModel", path: Union[str, Path]) -> None:
    """Raise CheckpointError when a saved weight's full shape differs from the built model's.

    Nanotron's loader reshards by slicing the saved tensor, so a checkpoint whose weights are
    larger than its config says would otherwise load silently, and wrongly, at another layout.
    """
    saved = saved_weight_shapes(path)
    for name, param in model.named_parameters():
        sharded = getattr(param, "is_sharded", False)
        expected = tuple(param.get_sharded_info().unsharded_shape if sharded else param.shape)
        if name in saved and saved[name] != expected:
            raise CheckpointError(
                f"Checkpoint {path}: {name} is saved with shape {saved[name]} but its model config gives "
                f"{expected}. The model config does not describe these weights: fix {MODEL_CONFIG_FILE}."
            )


def load_checkpoint_weights(
    model: "NanotronModel", parallel_context: "ParallelContext", path: Union[str, Path]
) -> None:
    """Copy a checkpoint's weights into a built model, resharding them to its layout (files checked
    first: every weight whole and floating point, no weight the model lacks, no value a trained
    model cannot have; collective over the world group)."""
    check_checkpoint_integrity(path, model_weight_shapes(model, parallel_context.world_pg))
    check_weight_shapes(model, path)
    check_weight_content(path, parallel_context.world_pg)
    from nanotron.serialize.weights import load_weights

    quiet_nanotron()  # its weight bars: on a terminal only

    try:
        load_weights(model=model, parallel_context=parallel_context, root_folder=Path(path))
    except (OSError, ValueError, KeyError, RuntimeError, AssertionError) as error:
        raise CheckpointError(
            f"Loading the weights of checkpoint {path} failed: {type(error).__name__}: {error}. "
            "Check that the folder is complete and that its model config matches the saved weights."
        ) from error


def load_nanotron_checkpoint(
    path: Union[str, Path],
    parallel_context: "ParallelContext",
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    parallel_config: Optional["ParallelismArgs"] = None,
) -> "tuple[NanotronModel, Any]":
    """Build the checkpoint's model on `parallel_context` (any layout that fits, its RoPE base
    applied) and load its weights.

    `dtype` defaults to config.yaml's `model.dtype`, else float32. Raises CheckpointError for a
    missing or unreadable checkpoint or weights that do not match its model config, LayoutError
    when the layout does not fit the model.
    """
    root = Path(path)
    checkpoint_model = read_checkpoint_model(root)
    check_complete_checkpoint(root)
    if dtype is None:
        dtype = read_checkpoint_dtype(root) or torch.float32
    model_config = checkpoint_model.model_config
    model = build_nanotron_model(
        model_config,
        parallel_context,
        dtype,
        device,
        parallel_config,
        carried=checkpoint_model.carried,
        random_init=False,  # every weight is loaded next (the checkpoint's integrity is checked first)
    )
    load_checkpoint_weights(model, parallel_context, root)
    return model, model_config
