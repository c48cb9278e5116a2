"""Current Nanotron's Qwen2 (`Qwen2ForTraining` / `Qwen2Model`, GitHub main; Nanotron 0.4 has none):
RMSNorm, a fused `qkv_proj` (all query heads, then keys, then values; biased with
`attention_bias`) with grouped-query attention, rotary embeddings (the config's `rope_theta`,
halves unless `rope_interleaved`; none on every `no_rope_layer`-th layer), SiLU-gated MLP or a
mixture of experts (`moe_config`), lm_head optionally tied to the embedding.

Its blocks lay activations out as `[batch * seq, hidden]`, with `position_ids` `[batch, seq]` and
`cu_seqlens` (its flash varlen attention restarts positions at each sequence start), not 0.4's
`[seq, batch, hidden]` with a mask; the chain calls below reshape around each block, so the engine
keeps its own layout. Its mixture of experts (`nn/moe.py`: a float32 router, softmax then top-k
without renormalisation, grouped expert MLPs, an optional sigmoid-gated shared expert) is run as
the model's own module on `[tokens, hidden]`; its experts are replicated on every TP rank, so only
expert parallelism 1 is supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from lighteval_nanotron.errors import LayoutError, UnsupportedModelError
from lighteval_nanotron.models.families.base import (
    ChainBlock,
    CpuNeeds,
    DecoderLayer,
    ModelFamily,
    Rotary,
    dataclass_from_fields,
)
from lighteval_nanotron.models.families.block_calls import linear, norm
from lighteval_nanotron.models.families.fused_qkv import FusedQkvLayer
from lighteval_nanotron.nanotron_compat.imports import import_nanotron, import_nanotron_models
from lighteval_nanotron.nanotron_compat.variant import has_qwen2

if TYPE_CHECKING:
    from lighteval_nanotron.models.families.hf_conversion import HfConversion

_RING_ATTENTION = "llama3_ring_attention"


def _has_rotary(config: Any, layer_index: int) -> bool:
    """Main skips rotary on layers `no_rope_layer - 1, 2 * no_rope_layer - 1, ...`."""
    return config.no_rope_layer is None or (layer_index + 1) % config.no_rope_layer != 0


class Qwen2Layer(FusedQkvLayer):
    def __init__(self, module: Any):
        attn, config = module.attn, module.attn.config
        rotary = Rotary(float(config.rope_theta), bool(config.rope_interleaved))
        rotary = rotary if _has_rotary(config, attn.layer_idx) else None
        super().__init__(module, attn.local_num_heads, attn.local_num_kv_heads, attn.head_dim, rotary)

    def mlp(self, hidden: torch.Tensor) -> torch.Tensor:
        """The dense MLP or the mixture of experts, on `[tokens, hidden]` as main calls them."""
        tokens = hidden.reshape(-1, hidden.shape[-1])
        return self._module.mlp(hidden_states=tokens)["hidden_states"].view(hidden.shape)


class Qwen2Family(ModelFamily):
    name = "qwen2"
    model_class_names = ("Qwen2ForTraining", "Qwen2Model")
    config_class_name = "Qwen2Config"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if has_qwen2():
            return None
        return (
            "the installed Nanotron (0.4) has no Qwen2; Qwen2 (dense and MoE) needs current Nanotron "
            "(GitHub main, verified at 2411b022): install it from source, see docs/engine.md, 'Nanotron versions'."
        )

    @classmethod
    def config_class(cls) -> type:
        return import_nanotron().Qwen2Config

    @classmethod
    def training_class(cls) -> type:
        import_nanotron_models()
        from nanotron.models.qwen import Qwen2ForTraining

        return Qwen2ForTraining

    @classmethod
    def recognises_fields(cls, fields: Mapping[str, Any]) -> bool:
        return bool(fields.get("is_qwen2_config"))

    @classmethod
    def config_from_fields(cls, fields: Mapping[str, Any], where: str) -> Any:
        """The `Qwen2Config`, its recorded `moe_config` mapping made a `MoEConfig` (unknown keys named)."""
        moe = fields.get("moe_config")
        if isinstance(moe, Mapping):
            moe_config = dataclass_from_fields(import_nanotron().MoEConfig, moe, f"{where} (moe_config)")
            fields = {**fields, "moe_config": moe_config}
        return dataclass_from_fields(cls.config_class(), fields, where)

    @classmethod
    def layout_sizes(cls, config: Any) -> dict[str, int]:
        sizes = {
            "num_attention_heads": config.num_attention_heads,
            "num_key_value_heads": config.num_key_value_heads,
            "vocab_size": config.vocab_size,
            "intermediate_size": config.intermediate_size,
        }
        moe = config.moe_config
        if moe is not None and moe.enable_shared_expert:
            sizes["moe_config.shared_expert_intermediate_size"] = moe.shared_expert_intermediate_size
        return sizes

    @classmethod
    def unsupported_reason(cls, config: Any) -> str | None:
        if config.sliding_window_size is not None:
            return (
                f"Qwen2 with sliding_window_size={config.sliding_window_size} is not supported: the engine's "
                "attention has no sliding window. Set it to null for models whose window covers the context."
            )
        if config.rope_seq_len_interpolation_factor is not None:
            return (
                f"Qwen2 with rope_seq_len_interpolation_factor={config.rope_seq_len_interpolation_factor} is not "
                "supported: the engine's rotary embedding has no position interpolation."
            )
        if not config._use_qkv_packed:
            return (
                "Qwen2 with _use_qkv_packed: false is not supported: Nanotron main's Qwen2Attention has no forward "
                "without it. Set it to true (the default)."
            )
        if config._attn_implementation == _RING_ATTENTION:
            return (
                f"Qwen2 with _attn_implementation: {_RING_ATTENTION} (context-parallel ring attention) is not "
                "supported: evaluate with flash_attention_2 (the default)."
            )
        return None

    @classmethod
    def chain(cls, inner: Any) -> list[ChainBlock]:
        experts = getattr(inner.parallel_config, "expert_parallel_size", 1) if inner.parallel_config else 1
        if experts != 1:
            raise UnsupportedModelError(
                f"Qwen2 with expert_parallel_size={experts} is not supported: the engine runs mixtures of experts "
                "with every expert on every rank (expert_parallel_size: 1)."
            )
        blocks = [ChainBlock(inner.token_position_embeddings, _embed)]
        blocks += [ChainBlock(block, _layer, "layer", index) for index, block in enumerate(inner.decoder)]
        blocks.append(ChainBlock(inner.final_layer_norm, norm, "norm"))
        blocks.append(ChainBlock(inner.lm_head, linear))
        return blocks

    @classmethod
    def decoder_layer(cls, module: Any) -> DecoderLayer:
        return Qwen2Layer(module)

    @classmethod
    def hf_conversion(cls) -> type[HfConversion]:
        from lighteval_nanotron.models.families.qwen2.conversion import Qwen2Conversion

        return Qwen2Conversion

    @classmethod
    def cpu_needs(cls) -> CpuNeeds:
        from lighteval_nanotron.models.families.qwen2.cpu_needs import cpu_needs

        return cpu_needs()


def _embed(module: Any, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`[batch, seq]` ids -> `[seq, batch, hidden]` embeddings (main flattens the ids it is given)."""
    seq_major = input_ids.transpose(0, 1).contiguous()
    embeds = module(input_ids=seq_major, position_ids=seq_major)["input_embeds"]
    return embeds.view(*seq_major.shape, -1)


def _layer(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Main's decoder layer on `[seq, batch, hidden]`: each row one sequence from position 0."""
    if not bool(mask.all()):
        raise LayoutError(
            "Qwen2 layers run through Nanotron's own forward take whole rows only (no masked positions): "
            "use the engine's tree attention for this batch."
        )
    seq, rows, width = hidden.shape
    flat = hidden.transpose(0, 1).reshape(rows * seq, width)
    positions = torch.arange(seq, device=hidden.device).repeat(rows, 1)
    cu_seqlens = torch.arange(0, rows * seq + 1, seq, dtype=torch.int32, device=hidden.device)
    attn, logged = module.attn, module.attn.log_attn_probs
    attn.log_attn_probs = False  # a training diagnostic (flash-attn returning the probabilities): not while evaluating
    try:
        out = module(hidden_states=flat, position_ids=positions, cu_seqlens=cu_seqlens)["hidden_states"]
    finally:
        attn.log_attn_probs = logged
    return out.view(rows, seq, width).transpose(0, 1)
