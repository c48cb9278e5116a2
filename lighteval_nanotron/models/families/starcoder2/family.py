"""Nanotron's Starcoder2 (`Starcoder2ForTraining` / `GPTModel`): LayerNorm with biases, biased
attention and MLP linears (GELU), rotary on halves (GPT-NeoX style) with the config's
`rope_theta`, an embedding dropout block, and one of two attention layouts:

- multi-query (`multi_query: true`, `CausalSelfMQA`): `qkv.q` is TP-sharded over query heads,
  `qkv.kv` (one key head and one value head, `[k; v]`) is replicated on every TP rank;
- grouped-query (`grouped_query: true`, `CausalSelfGQA`): one fused `query_key_value` linear whose
  output, per KV head, holds that head's `n_repeats` query heads, then its key, then its value.

The lm_head is always tied to the embedding (`get_embeddings_lm_head_tied_names`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from lighteval_nanotron.models.families.base import ChainBlock, CpuNeeds, DecoderLayer, ModelFamily, Rotary
from lighteval_nanotron.models.families.block_calls import embed_with_mask, layer_with_mask, linear, norm
from lighteval_nanotron.nanotron_compat.imports import import_nanotron, import_nanotron_models
from lighteval_nanotron.nanotron_compat.variant import starcoder2_trainable

if TYPE_CHECKING:
    from lighteval_nanotron.models.families.hf_conversion import HfConversion


def _rotary(attn: Any) -> Rotary | None:
    rotary = attn.maybe_rotary
    if isinstance(rotary, torch.nn.Module) and hasattr(rotary, "base"):
        return Rotary(float(rotary.base), interleaved=False)
    return None  # use_rotary_embeddings: false


class Starcoder2Layer(DecoderLayer):
    def __init__(self, module: Any):
        self._module = module
        attn = module.attn
        self._attn = attn
        self._multi_query = hasattr(attn, "qkv")
        if self._multi_query:
            self.q_heads, self.kv_heads, self.head_dim = attn.n_heads, 1, attn.d_qk
        else:
            self.q_heads, self.kv_heads, self.head_dim = attn.n_local_q_heads, attn.n_local_kv_heads, attn.head_dim
        self.rotary = _rotary(attn)

    def attention_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.ln_1(hidden)

    def qkv(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._multi_query:
            q, kv = self._attn.qkv(hidden)
            k, v = torch.split(kv, [self.head_dim, self.head_dim], dim=-1)
            return q, k, v
        fused = self._attn.query_key_value(hidden)
        seq, rows, _ = fused.shape
        repeats = self.q_heads // self.kv_heads
        grouped = fused.view(seq, rows, self.kv_heads, repeats + 2, self.head_dim)
        q, k, v = torch.split(grouped, [repeats, 1, 1], dim=3)
        return q.reshape(seq, rows, -1), k.reshape(seq, rows, -1), v.reshape(seq, rows, -1)

    def attention_out(self, attended: torch.Tensor) -> torch.Tensor:
        return (self._attn.o if self._multi_query else self._attn.dense)(attended)

    def mlp_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.ln_2(hidden)

    def mlp(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.ff(hidden_states=hidden)["hidden_states"]


class Starcoder2Family(ModelFamily):
    name = "starcoder2"
    model_class_names = ("Starcoder2ForTraining", "GPTModel")

    @classmethod
    def training_unavailable_reason(cls) -> str | None:
        if starcoder2_trainable():
            return None
        return (
            "the installed Nanotron's training Config cannot hold a Starcoder2: its Config.__post_init__ reads "
            "model_config.num_key_value_heads (nanotron/config/config.py:540 of GitHub main at 2411b02), which its "
            "Starcoder2Config does not have (it has num_kv_heads). Train or convert Starcoder2 with Nanotron 0.4 "
            "(pip install nanotron==0.4); its checkpoints evaluate under either."
        )

    @classmethod
    def config_class(cls) -> type:
        return import_nanotron().Starcoder2Config

    @classmethod
    def training_class(cls) -> type:
        import_nanotron_models()
        from nanotron.models.starcoder2 import Starcoder2ForTraining

        return Starcoder2ForTraining

    @classmethod
    def recognises_fields(cls, fields: Any) -> bool:
        return bool(fields.get("is_starcoder2_config"))

    @classmethod
    def layout_sizes(cls, config: Any) -> dict[str, int]:
        sizes = {
            "num_attention_heads": config.num_attention_heads,
            "vocab_size": config.vocab_size,
            "intermediate_size": config.n_inner,
        }
        if config.grouped_query:
            sizes["num_kv_heads"] = config.num_kv_heads
        return sizes

    @classmethod
    def unsupported_reason(cls, config: Any) -> str | None:
        if config.sliding_window_size is None:
            return None
        return (
            f"Starcoder2 with sliding_window_size={config.sliding_window_size} is not supported: the engine's "
            "attention has no sliding window. Set it to null for models whose window covers the context."
        )

    @classmethod
    def chain(cls, inner: Any) -> list[ChainBlock]:
        blocks = [ChainBlock(inner.token_embeddings, embed_with_mask), ChainBlock(inner.embeds_dropout, _dropout)]
        blocks += [ChainBlock(block, layer_with_mask, "layer", index) for index, block in enumerate(inner.decoder)]
        blocks.append(ChainBlock(inner.final_layer_norm, norm, "norm"))
        blocks.append(ChainBlock(inner.lm_head, linear))
        blocks.append(ChainBlock(inner.cast_to_fp32, linear))
        return blocks

    @classmethod
    def decoder_layer(cls, module: Any) -> DecoderLayer:
        return Starcoder2Layer(module)

    @classmethod
    def hf_conversion(cls) -> type[HfConversion]:
        from lighteval_nanotron.models.families.starcoder2.conversion import Starcoder2Conversion

        return Starcoder2Conversion

    @classmethod
    def cpu_needs(cls) -> CpuNeeds:
        from lighteval_nanotron.models.families.starcoder2.cpu_needs import cpu_needs

        return cpu_needs()


def _dropout(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(input=hidden)
