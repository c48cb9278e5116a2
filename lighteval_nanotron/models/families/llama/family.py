"""Nanotron's Llama (`LlamaForTraining` / `LlamaModel`): RMSNorm, fused qkv (all query heads, then
keys, then values) with grouped-query attention, rotary embeddings, SiLU-gated MLP, lm_head
optionally tied to the embedding.

Nanotron 0.4's `LlamaConfig` has no RoPE base (it always uses 10000) and always rotates
interleaved pairs. Current Nanotron (GitHub main) records `rope_theta` and `rope_interleaved`
(default false: the two halves of each head, as Hugging Face; its q/k rows are then in Hugging
Face order), and `lighteval-nanotron convert` records `rope_theta` for models with another base.
Both are carried beside 0.4's config and set on the built model (`apply_carried`). Main's other
new keys do not change the logits (`_attn_implementation`, `z_loss_*`) or must be off
(`attention_bias`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from lighteval_nanotron.models.families.base import ChainBlock, CpuNeeds, DecoderLayer, ModelFamily, Rotary
from lighteval_nanotron.models.families.block_calls import embed_with_mask, layer_with_mask, linear, norm
from lighteval_nanotron.models.families.fused_qkv import FusedQkvLayer
from lighteval_nanotron.nanotron_compat.imports import import_nanotron, import_nanotron_models

if TYPE_CHECKING:
    from lighteval_nanotron.models.families.hf_conversion import HfConversion


class LlamaLayer(FusedQkvLayer):
    def __init__(self, module: Any):
        attn, rotary = module.attn, module.attn.flash_rotary_embedding
        rope = Rotary(float(rotary.base), bool(rotary.interleaved))
        super().__init__(module, attn.n_local_q_heads, attn.n_local_kv_heads, attn.d_qk, rope)

    def mlp(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.mlp(hidden_states=hidden)["hidden_states"]


class LlamaFamily(ModelFamily):
    name = "llama"
    model_class_names = ("LlamaForTraining", "LlamaModel")
    carried_fields = {"rope_theta": 10000.0, "rope_interleaved": True}
    inert_fields = {
        "_attn_implementation": None,
        "z_loss_enabled": None,
        "z_loss_coefficient": None,
        "attention_bias": False,
    }

    @classmethod
    def config_class(cls) -> type:
        return import_nanotron().LlamaConfig

    @classmethod
    def training_class(cls) -> type:
        import_nanotron_models()
        from nanotron.models.llama import LlamaForTraining

        return LlamaForTraining

    @classmethod
    def recognises_fields(cls, fields: Any) -> bool:
        """Llama configs carry `rms_norm_eps` and no `is_<family>_config` marker but `is_llama_config`
        (Starcoder2's and Qwen2's configs have their own)."""
        markers = {key for key in fields if key.startswith("is_") and key.endswith("_config") and fields[key]}
        return "rms_norm_eps" in fields and markers <= {"is_llama_config"}

    @classmethod
    def unsupported_reason(cls, config: Any) -> str | None:
        """attention_bias=True (a field of current Nanotron's LlamaConfig, inert under 0.4): Nanotron's
        Llama builds its qkv projection without bias either way (main ignores the flag). Spectral µP
        (current Nanotron's `SpectralMupInit`, marked on the config as `_is_using_mup`): main's
        attention then scales scores by 1/d, the engine's by 1/sqrt(d)."""
        if getattr(config, "_is_using_mup", False):
            return (
                "Llama trained with spectral µP (init_method use_mup) is not supported: its attention scales "
                "scores by 1/head_dim and the engine's by 1/sqrt(head_dim), so every score would be wrong."
            )
        if not getattr(config, "attention_bias", False):
            return None
        return (
            "Llama with attention_bias=True is not supported: Nanotron's Llama has no qkv bias (current "
            "Nanotron ignores the flag), so the built model would not be the one the weights come from."
        )

    @classmethod
    def layout_sizes(cls, config: Any) -> dict[str, int]:
        return {
            "num_attention_heads": config.num_attention_heads,
            "num_key_value_heads": config.num_key_value_heads,
            "vocab_size": config.vocab_size,
            "intermediate_size": config.intermediate_size,
        }

    @classmethod
    def chain(cls, inner: Any) -> list[ChainBlock]:
        blocks = [ChainBlock(inner.token_position_embeddings, embed_with_mask)]
        blocks += [ChainBlock(block, layer_with_mask, "layer", index) for index, block in enumerate(inner.decoder)]
        blocks.append(ChainBlock(inner.final_layer_norm, norm, "norm"))
        blocks.append(ChainBlock(inner.lm_head, linear))
        blocks.append(ChainBlock(inner.cast_to_fp32, linear))
        return blocks

    @classmethod
    def decoder_layer(cls, module: Any) -> DecoderLayer:
        return LlamaLayer(module)

    @classmethod
    def apply_carried(cls, model: torch.nn.Module, carried: Any) -> None:
        """Give every attention layer of a built Nanotron 0.4 Llama the recorded RoPE base and pair layout.

        Nanotron 0.4 builds its two rotary modules with base 10000 and interleaved pairs:
        `flash_rotary_embedding` (the full-sequence forward, and the engine's layer view) is rebuilt;
        `rotary_embedding` (0.4's own KV-cache decode, interleaved only) gets the base."""
        theta = float(carried.get("rope_theta", cls.carried_fields["rope_theta"]))
        interleaved = bool(carried.get("rope_interleaved", cls.carried_fields["rope_interleaved"]))
        for module in model.modules():
            flash_rotary = getattr(module, "flash_rotary_embedding", None)
            if flash_rotary is None:
                continue
            module.flash_rotary_embedding = type(flash_rotary)(
                dim=flash_rotary.dim, base=theta, interleaved=interleaved
            )
            module.rotary_embedding.theta = theta
            module.rotary_embedding._initialized_buffer = False

    @classmethod
    def hf_conversion(cls) -> type[HfConversion]:
        from lighteval_nanotron.models.families.llama.conversion import LlamaConversion

        return LlamaConversion

    @classmethod
    def cpu_needs(cls) -> CpuNeeds:
        from lighteval_nanotron.models.families.llama.cpu_needs import cpu_needs

        return cpu_needs()
