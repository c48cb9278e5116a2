"""What every family's Hugging Face conversion shares: the interface `lighteval-nanotron convert` calls
(`HfConversion`, one subclass in each family's `conversion.py`) and the `config.json` fields every
mapping reads the same way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, List, Optional, Union

import torch

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families.base import DEFAULT_ROPE_THETA
from lighteval_nanotron.options.base import describe_type, matches_type

_IDS = Optional[Union[int, List[int]]]
HF_CONFIG_TYPES: dict[str, Any] = {
    **dict.fromkeys(("tie_word_embeddings", "attention_bias", "mlp_bias", "use_bias", "use_sliding_window",
                     "norm_topk_prob"), bool),
    **dict.fromkeys(("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
                     "max_position_embeddings", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                     "shared_expert_intermediate_size", "decoder_sparse_step"), int),
    **dict.fromkeys(("num_key_value_heads", "head_dim", "sliding_window"), Optional[int]),
    **dict.fromkeys(("rms_norm_eps", "norm_epsilon", "layer_norm_epsilon", "initializer_range", "rope_theta"), float),
    **dict.fromkeys(("bos_token_id", "eos_token_id", "pad_token_id"), _IDS),
    **dict.fromkeys(("rope_scaling", "rope_parameters"), Optional[dict]),
    **dict.fromkeys(("model_type", "hidden_act"), str),
    "architectures": Optional[List[str]],
}  # fmt: skip
"""The types of the `config.json` fields the conversions read. The mappings coerce (`bool(...)`,
`int(...)`, `float(...)`): `tie_word_embeddings: "false"` would convert an untied model as tied,
dropping its lm_head, and `bos_token_id: true` would become id 1."""


def check_hf_config(hf_config: Any, where: str = "config.json") -> None:
    """CheckpointError naming `where` and the key for a config that is not a mapping or holds a
    value of another type than `HF_CONFIG_TYPES` gives, before anything is mapped."""
    if not isinstance(hf_config, Mapping):
        raise CheckpointError(f"{where} is {type(hf_config).__name__}, not a JSON object of model settings.")
    for key, hint in HF_CONFIG_TYPES.items():
        if key in hf_config and not matches_type(hf_config[key], hint, whole_floats=True):
            raise CheckpointError(
                f"{where} has {key}={hf_config[key]!r}: give {describe_type(hint)}. Fix that value of the model's "
                "config."
            )


class HfConversion(ABC):
    """A family's Hugging Face checkpoints (`config.json` and weights) -> a Nanotron model config and
    full (unsharded) Nanotron weights. Subclasses set the class attributes and implement the methods."""

    title: ClassVar[str]
    """The architecture's name in messages, e.g. "Llama"."""
    model_types: ClassVar[tuple[str, ...]]
    """`config.json` `model_type`s the family converts, e.g. ("llama",)."""
    architectures: ClassVar[tuple[str, ...]]
    """Hugging Face classes the family converts, e.g. ("LlamaForCausalLM",)."""

    @classmethod
    def recognises(cls, hf_config: Mapping[str, Any]) -> bool:
        """True when `config.json` is one of the family's (by `model_type` or `architectures`)."""
        architectures = hf_config.get("architectures") or []
        return hf_config.get("model_type") in cls.model_types or any(
            name in architectures for name in cls.architectures
        )

    @classmethod
    @abstractmethod
    def nanotron_config(cls, hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        """The Nanotron model config fields and the RoPE base; CheckpointError for options the target
        (or the engine) cannot represent."""

    @classmethod
    def recorded_fields(cls, model_config: Mapping[str, Any], rope_theta: float) -> dict[str, Any]:
        """The fields the converted checkpoint records (default: the model config's, which carry the RoPE base)."""
        return dict(model_config)

    @classmethod
    @abstractmethod
    def weights(
        cls,
        hf_weights: Mapping[str, torch.Tensor],
        model_config: Mapping[str, Any],
        rotary_layout: tuple[float, bool] | None,
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Full Nanotron weights, one at a time (a lazy `hf_weights` keeps about one layer in memory);
        `rotary_layout` is what the converted config reads back to (`CheckpointModel.rotary_layout`)."""


def rope_theta_from_hf(hf_config: Mapping[str, Any], target: str) -> float:
    """The plain-RoPE base; CheckpointError for RoPE scaling, which `target` (e.g. "Nanotron 0.4's
    Llama") does not have. transformers >= 5 writes `rope_parameters`; older versions a top-level
    `rope_theta`."""
    params = hf_config.get("rope_parameters") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    scaling = hf_config.get("rope_scaling")
    if rope_type != "default" or (scaling and scaling.get("rope_type", scaling.get("type")) != "default"):
        raise CheckpointError(
            f"RoPE scaling {scaling or params} is not supported: {target} has plain RoPE only. "
            "Convert a checkpoint without rope scaling."
        )
    theta = params.get("rope_theta", hf_config.get("rope_theta", DEFAULT_ROPE_THETA))
    if not matches_type(theta, float, whole_floats=True):
        raise CheckpointError(f"config.json has rope_theta={theta!r}: give a number (fix that value of the config).")
    return float(theta)


def first_id(value: Any) -> int | None:
    """Llama 3 lists several eos ids; Nanotron's config holds one."""
    if isinstance(value, (list, tuple)):
        return int(value[0]) if value else None
    return None if value is None else int(value)
