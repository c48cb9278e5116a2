"""The supported model families (`FAMILIES`, the one registry) and how a model, a model config,
recorded fields or a Hugging Face `config.json` find theirs.

    family = family_of_model(trainer.model)          # UnsupportedModelError for anything else
    family = family_of_fields(model_config_json)     # from a checkpoint's recorded config
    family = family_of_hf_config(config_json)        # what `lighteval-nanotron convert` converts

A family the installed Nanotron cannot build (Qwen2 under 0.4) is still recognised, and refused
with its `unavailable_reason`, naming the Nanotron it needs.

Adding a family: one folder here (`family.py` with its `ModelFamily` subclass, `conversion.py`,
`cpu_needs.py`, `tiny.py`), one line in `FAMILIES` (see docs/engine.md, "Model families").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from lighteval_nanotron.errors import CheckpointError, UnsupportedModelError
from lighteval_nanotron.models.families.base import ChainBlock, CpuNeeds, DecoderLayer, ModelFamily, Rotary
from lighteval_nanotron.models.families.llama import LlamaFamily
from lighteval_nanotron.models.families.qwen2 import Qwen2Family
from lighteval_nanotron.models.families.starcoder2 import Starcoder2Family

FAMILIES: tuple[type[ModelFamily], ...] = (LlamaFamily, Starcoder2Family, Qwen2Family)


def available_families() -> list[type[ModelFamily]]:
    """The families the installed Nanotron can build (not Qwen2 under 0.4)."""
    return [family for family in FAMILIES if family.unavailable_reason() is None]


def supported_description(with_configs: bool = False, for_training: bool = False) -> str:
    """The supported families and their Nanotron class names (config class first with `with_configs`),
    e.g. `llama (LlamaForTraining, LlamaModel), starcoder2 (...)`; `for_training`: only those the
    installed Nanotron's trainer can take."""
    described = []
    for family in FAMILIES:
        if for_training and (family.unavailable_reason() or family.training_unavailable_reason()):
            continue
        unavailable = family.unavailable_reason() is not None
        config_name = family.config_class_name if unavailable else family.config_class().__name__
        names = ", ".join((config_name,) * with_configs + family.model_class_names)
        described.append(f"{family.name} ({names}{'; needs current Nanotron' if unavailable else ''})")
    return ", ".join(described)


def _wrapped(model: Any) -> list[Any]:
    """`model` and what it wraps (DDP `.module`, a training model's `.model`), outermost first."""
    found = [model]
    while len(found) < 4:
        inner = getattr(found[-1], "module", None)
        if inner is None:
            inner = getattr(found[-1], "model", None)
        if not isinstance(inner, torch.nn.Module):
            break
        found.append(inner)
    return found


def family_of_model(model: Any) -> type[ModelFamily]:
    """The family of a built Nanotron model (training model, inner model or a DDP wrapper)."""
    names = [type(candidate).__name__ for candidate in _wrapped(model)]
    for family in FAMILIES:
        if any(name in family.model_class_names for name in names):
            return family
    raise UnsupportedModelError(
        f"Model class {type(model).__name__} is not supported by lighteval_nanotron. "
        f"Supported Nanotron models: {supported_description()}."
    )


def family_of_config(config: Any) -> type[ModelFamily]:
    """The family of a Nanotron model config object."""
    for family in FAMILIES:
        if family.unavailable_reason() is None and isinstance(config, family.config_class()):
            return family
    raise UnsupportedModelError(
        f"Model config class {type(config).__name__} is not supported by lighteval_nanotron. "
        f"Supported Nanotron models: {supported_description(with_configs=True)}."
    )


def refuse_untrainable_config(config: Any) -> None:
    """UnsupportedModelError when `config` is of a family the installed Nanotron's training `Config`
    cannot hold (Starcoder2 under GitHub main), naming its class and the families it can train; called
    before such a `Config` is built (the hook's training config, the converter's config.yaml). Config
    classes of no family are left to Nanotron (the evaluator refuses them at setup)."""
    for family in FAMILIES:
        if family.unavailable_reason() is not None or not isinstance(config, family.config_class()):
            continue
        reason = family.training_unavailable_reason()
        if reason is not None:
            trainable = supported_description(with_configs=True, for_training=True)
            raise UnsupportedModelError(
                f"Model config class {type(config).__name__} ({family.name}) cannot go into a training config of "
                f"the installed Nanotron: {reason} Supported for training with it: {trainable}."
            )


def family_of_fields(fields: Mapping[str, Any], where: str = "the model config") -> type[ModelFamily]:
    """The family whose config recorded fields (a checkpoint's model config) describe."""
    for family in FAMILIES:
        if family.recognises_fields(fields):
            reason = family.unavailable_reason()
            if reason is not None:
                raise UnsupportedModelError(f"{where} describes a {family.name} model: {reason}")
            return family
    markers = [key for key in sorted(fields) if key.startswith("is_") and key.endswith("_config") and fields[key]]
    described = f"a {markers[0]}: true model" if markers else f"a model config with keys {', '.join(sorted(fields))}"
    raise UnsupportedModelError(
        f"{where} describes {described}, which lighteval_nanotron does not support with the installed Nanotron. "
        f"Supported Nanotron models: {supported_description(with_configs=True)}."
    )


def family_of_hf_config(hf_config: Mapping[str, Any]) -> type[ModelFamily]:
    """The family whose Hugging Face conversion takes `config.json` (a Qwen2 one under Nanotron 0.4 too:
    the converted config is refused later, with the family's `unavailable_reason`); CheckpointError
    naming what converts otherwise."""
    conversions = [(family, family.hf_conversion()) for family in FAMILIES if family.hf_conversion() is not None]
    for family, conversion in conversions:
        if conversion.recognises(hf_config):
            return family
    titles = _listed([conversion.title for _, conversion in conversions], "and")
    classes = _listed([name for _, conversion in conversions for name in conversion.architectures], "or")
    raise CheckpointError(
        f"Only {titles} checkpoints can be converted, got model_type={hf_config.get('model_type')!r} "
        f"architectures={hf_config.get('architectures') or []}. Convert a {classes} checkpoint."
    )


def _listed(names: list[str], last: str) -> str:
    """`a, b and c` (`last` = "and")."""
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else "".join(names)


__all__ = [
    "FAMILIES",
    "ChainBlock",
    "CpuNeeds",
    "DecoderLayer",
    "LlamaFamily",
    "ModelFamily",
    "Qwen2Family",
    "Rotary",
    "Starcoder2Family",
    "available_families",
    "family_of_config",
    "family_of_fields",
    "family_of_hf_config",
    "family_of_model",
    "refuse_untrainable_config",
    "supported_description",
]
