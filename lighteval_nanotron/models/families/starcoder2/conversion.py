"""Pure mapping from Hugging Face Starcoder2 to Nanotron 0.4 `Starcoder2ForTraining`: config and weights
(`Starcoder2Conversion` is what `lighteval-nanotron convert` calls).

Both apply rotary embeddings to the two halves of each head (GPT-NeoX style), so no row is
permuted. The layout differences:

- one KV head (`num_key_value_heads: 1`) becomes Nanotron's multi-query attention: `qkv.q` holds
  `q_proj`, `qkv.kv` holds `k_proj` then `v_proj` rows;
- otherwise grouped-query attention: one fused `query_key_value` whose rows are, for each KV head
  in turn, its query heads, then its key head, then its value head;
- Nanotron 0.4's Starcoder2 always ties the lm_head to the embedding: an untied model cannot be
  represented and is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families.hf_conversion import HfConversion, first_id, rope_theta_from_hf

_NT_LAYER = "model.decoder.{i}.pp_block."
_HF_LAYER = "model.layers.{i}."
_NAME = "Nanotron 0.4's Starcoder2"


def nanotron_config_from_hf(hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """Nanotron 0.4 `Starcoder2Config` fields and the RoPE theta for a Hugging Face Starcoder2 `config.json`.

    Raises CheckpointError for options Nanotron 0.4's Starcoder2 (or the engine) cannot represent."""
    hidden, heads = hf_config["hidden_size"], hf_config["num_attention_heads"]
    kv_heads = hf_config.get("num_key_value_heads") or heads
    if hf_config.get("head_dim") not in (None, hidden // heads) or hidden % heads:
        raise CheckpointError(f"{_NAME} requires head_dim = hidden_size / num_attention_heads.")
    if not hf_config.get("tie_word_embeddings", True):
        raise CheckpointError(
            f"`tie_word_embeddings: false` is not supported: {_NAME} always ties its lm_head to the embedding."
        )
    if not hf_config.get("use_bias", True):
        raise CheckpointError(f"`use_bias: false` is not supported: {_NAME} always has biases.")
    max_positions = hf_config.get("max_position_embeddings", 4096)
    window = hf_config.get("sliding_window")
    if window is not None and window < max_positions:
        raise CheckpointError(
            f"sliding_window={window} < max_position_embeddings={max_positions} is not supported: the engine's "
            "attention has no sliding window. Convert a model whose window covers its context."
        )
    rope_theta = rope_theta_from_hf(hf_config, _NAME)
    config = {
        "activation_function": hf_config.get("hidden_act", "gelu_pytorch_tanh"),
        "attn_pdrop": float(hf_config.get("attention_dropout", 0.0)),
        "bos_token_id": first_id(hf_config.get("bos_token_id")),
        "embd_pdrop": float(hf_config.get("embedding_dropout", 0.0)),
        "eos_token_id": first_id(hf_config.get("eos_token_id")),
        "grouped_query": kv_heads > 1,
        "hidden_size": hidden,
        "initializer_range": float(hf_config.get("initializer_range", 0.02)),
        "intermediate_size": hf_config["intermediate_size"],
        "is_starcoder2_config": True,
        "layer_norm_epsilon": float(hf_config.get("norm_epsilon", 1e-5)),
        "max_position_embeddings": max_positions,
        "multi_query": kv_heads == 1,
        "num_attention_heads": heads,
        "num_hidden_layers": hf_config["num_hidden_layers"],
        "num_kv_heads": kv_heads if kv_heads > 1 else None,
        "resid_pdrop": float(hf_config.get("residual_dropout", 0.0)),
        "rope_theta": rope_theta,
        "sliding_window_size": None,
        "use_rotary_embeddings": True,
        "vocab_size": hf_config["vocab_size"],
    }
    return config, rope_theta


def _take(state_dict: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    try:
        return state_dict[name]
    except KeyError:
        raise CheckpointError(
            f"Weight `{name}` is missing from the checkpoint; is it a complete Starcoder2 checkpoint?"
        ) from None


def _grouped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """HF q/k/v rows (weights or biases) -> Nanotron's fused grouped-query rows."""
    tail = q.shape[1:]
    per_kv = [t.reshape(kv_heads, -1, k.shape[0] // kv_heads, *tail) for t in (q, k, v)]
    return torch.cat(per_kv, dim=1).reshape(-1, *tail)


def iter_hf_to_nanotron(
    hf: Mapping[str, torch.Tensor], config: Mapping[str, Any]
) -> Iterator[tuple[str, torch.Tensor]]:
    """Hugging Face Starcoder2 weights -> full (unsharded) Nanotron 0.4 `Starcoder2ForTraining` weights."""
    embedding = _take(hf, "model.embed_tokens.weight")
    yield "model.token_embeddings.pp_block.token_embedding.weight", embedding
    yield "model.lm_head.pp_block.weight", embedding
    del embedding
    for part in ("weight", "bias"):
        yield f"model.final_layer_norm.pp_block.{part}", _take(hf, f"model.norm.{part}")
    for i in range(config["num_hidden_layers"]):
        src, dst = _HF_LAYER.format(i=i), _NT_LAYER.format(i=i)
        for part in ("weight", "bias"):
            q, k, v = (_take(hf, f"{src}self_attn.{name}_proj.{part}") for name in ("q", "k", "v"))
            if config["multi_query"]:
                yield f"{dst}attn.qkv.q.{part}", q
                yield f"{dst}attn.qkv.kv.{part}", torch.cat([k, v], dim=0)
                yield f"{dst}attn.o.{part}", _take(hf, f"{src}self_attn.o_proj.{part}")
            else:
                yield f"{dst}attn.query_key_value.{part}", _grouped(q, k, v, config["num_kv_heads"])
                yield f"{dst}attn.dense.{part}", _take(hf, f"{src}self_attn.o_proj.{part}")
            yield f"{dst}ff.c_fc.{part}", _take(hf, f"{src}mlp.c_fc.{part}")
            yield f"{dst}ff.c_proj.{part}", _take(hf, f"{src}mlp.c_proj.{part}")
            yield f"{dst}ln_1.{part}", _take(hf, f"{src}input_layernorm.{part}")
            yield f"{dst}ln_2.{part}", _take(hf, f"{src}post_attention_layernorm.{part}")


class Starcoder2Conversion(HfConversion):
    title = "Starcoder2"
    model_types = ("starcoder2",)
    architectures = ("Starcoder2ForCausalLM",)

    @classmethod
    def nanotron_config(cls, hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        return nanotron_config_from_hf(hf_config)

    @classmethod
    def weights(
        cls,
        hf_weights: Mapping[str, torch.Tensor],
        model_config: Mapping[str, Any],
        rotary_layout: tuple[float, bool] | None,
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Both rotate halves: no row is permuted (`rotary_layout` is None for Starcoder2)."""
        return iter_hf_to_nanotron(hf_weights, model_config)
