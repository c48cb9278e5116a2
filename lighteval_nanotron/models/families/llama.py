"""Nanotron's Llama (`LlamaForTraining` / `LlamaModel`): RMSNorm, fused qkv (all query heads, then
keys, then values) with grouped-query attention, rotary on interleaved pairs, SiLU-gated MLP,
lm_head optionally tied to the embedding.

Nanotron 0.4's `LlamaConfig` has no RoPE base (it always uses 10000); newer Nanotron versions
and `lighteval-nanotron convert` record one as `rope_theta`, which `apply_rope_theta` sets on a
built model.
"""

from __future__ import annotations

from typing import Any

import torch

from lighteval_nanotron.models.families.base import ChainBlock, DecoderLayer, ModelFamily, Rotary
from lighteval_nanotron.parallel.cpu.imports import import_nanotron


class LlamaLayer(DecoderLayer):
    def __init__(self, module: Any):
        self._module = module
        attn = module.attn
        self._attn = attn
        self.q_heads, self.kv_heads, self.head_dim = attn.n_local_q_heads, attn.n_local_kv_heads, attn.d_qk
        rotary = attn.flash_rotary_embedding
        self.rotary = Rotary(float(rotary.base), bool(rotary.interleaved))

    def attention_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.input_layernorm(hidden)

    def qkv(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q_size, kv_size = self.q_heads * self.head_dim, self.kv_heads * self.head_dim
        return torch.split(self._attn.qkv_proj(hidden), [q_size, kv_size, kv_size], dim=-1)

    def attention_out(self, attended: torch.Tensor) -> torch.Tensor:
        return self._attn.o_proj(attended)

    def mlp_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.post_attention_layernorm(hidden)

    def mlp(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.mlp(hidden_states=hidden)["hidden_states"]


class LlamaFamily(ModelFamily):
    name = "llama"
    model_class_names = ("LlamaForTraining", "LlamaModel")

    @classmethod
    def config_class(cls) -> type:
        return import_nanotron().LlamaConfig

    @classmethod
    def training_class(cls) -> type:
        import_nanotron()
        from nanotron.models.llama import LlamaForTraining

        return LlamaForTraining

    @classmethod
    def recognises_fields(cls, fields: Any) -> bool:
        """Llama configs carry `rms_norm_eps` and no `is_<family>_config` marker but `is_llama_config`
        (Starcoder2's and Qwen2's configs have their own)."""
        markers = {key for key in fields if key.startswith("is_") and key.endswith("_config") and fields[key]}
        return "rms_norm_eps" in fields and markers <= {"is_llama_config"}

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
        blocks = [ChainBlock(inner.token_position_embeddings, _embed)]
        blocks += [ChainBlock(block, _layer, "layer", index) for index, block in enumerate(inner.decoder)]
        blocks.append(ChainBlock(inner.final_layer_norm, _norm, "norm"))
        blocks.append(ChainBlock(inner.lm_head, _linear))
        blocks.append(ChainBlock(inner.cast_to_fp32, _linear))
        return blocks

    @classmethod
    def decoder_layer(cls, module: Any) -> DecoderLayer:
        return LlamaLayer(module)

    @classmethod
    def apply_rope_theta(cls, model: torch.nn.Module, rope_theta: float) -> None:
        """Give every attention layer of a built Nanotron 0.4 Llama this RoPE base.

        Nanotron 0.4 builds its two rotary modules with the default base: `flash_rotary_embedding`
        (used by the full-sequence forward) is rebuilt, `rotary_embedding` (the KV-cache path) gets
        its `theta` and recomputes its table on first use.
        """
        for module in model.modules():
            flash_rotary = getattr(module, "flash_rotary_embedding", None)
            if flash_rotary is None:
                continue
            module.flash_rotary_embedding = type(flash_rotary)(
                dim=flash_rotary.dim, base=rope_theta, interleaved=flash_rotary.interleaved
            )
            module.rotary_embedding.theta = rope_theta
            module.rotary_embedding._initialized_buffer = False


def _embed(module: Any, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(input_ids=input_ids, input_mask=mask)["input_embeds"]


def _layer(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(hidden_states=hidden, sequence_mask=mask)["hidden_states"]


def _norm(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(input=hidden)


def _linear(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(x=hidden)
