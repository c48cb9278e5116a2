"""Pure mapping from Hugging Face Qwen2 / Qwen2-MoE to current Nanotron's `Qwen2ForTraining`
(GitHub main): config and weights (`Qwen2Conversion` is what `lighteval-nanotron convert` calls).

Both rotate the two halves of each head (`rope_interleaved: false`), so no row is permuted:

- `q_proj`, `k_proj`, `v_proj` (weights and biases) -> the fused `attn.qkv_proj` (q, then k, then v
  rows); Qwen2 always has q/k/v biases (`attention_bias: true`), Qwen2-MoE when `qkv_bias`;
- `gate_proj`, `up_proj` -> `mlp.gate_up_proj` (gate rows, then up rows);
- a sparse MoE block -> `mlp.router.weight` (the gate), `mlp.experts.merged_gate_up_proj`
  `[experts, hidden, 2 * moe_intermediate]` and `mlp.experts.merged_down_proj`
  `[experts, moe_intermediate, hidden]` (the per-expert matrices transposed: main multiplies
  `tokens @ W`), the shared expert and its sigmoid gate. Main's router keeps softmax-then-top-k
  weights as they are, so `norm_topk_prob: true` is refused; the MoE layers are HF's
  (`decoder_sparse_step`, `mlp_only_layers`) listed in `moe_config.layers`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families.hf_conversion import HfConversion, first_id, rope_theta_from_hf

_NT_LAYER = "model.decoder.{i}.pp_block."
_HF_LAYER = "model.layers.{i}."
_NAME = "Nanotron main's Qwen2"


def is_hf_qwen2(hf_config: Mapping[str, Any]) -> bool:
    """A Hugging Face Qwen2 or Qwen2-MoE `config.json`."""
    return Qwen2Conversion.recognises(hf_config)


def _moe_layers(hf_config: Mapping[str, Any]) -> list[int]:
    """The layers HF builds as sparse MoE blocks (the others are dense MLPs)."""
    if hf_config.get("model_type") != "qwen2_moe" or not hf_config.get("num_experts"):
        return []
    step = int(hf_config.get("decoder_sparse_step", 1))
    skipped = set(hf_config.get("mlp_only_layers") or [])
    return [i for i in range(hf_config["num_hidden_layers"]) if i not in skipped and (i + 1) % step == 0]


def _check_supported(hf_config: Mapping[str, Any]) -> None:
    hidden, heads = hf_config["hidden_size"], hf_config["num_attention_heads"]
    if hf_config.get("head_dim") not in (None, hidden // heads) or hidden % heads:
        raise CheckpointError(f"{_NAME} requires head_dim = hidden_size / num_attention_heads.")
    if hf_config.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"hidden_act={hf_config['hidden_act']!r} is not supported: {_NAME} converts SiLU MLPs.")
    max_positions = hf_config.get("max_position_embeddings", 32768)
    window = hf_config.get("sliding_window")
    layer_types = hf_config.get("layer_types")
    slides = "sliding_attention" in layer_types if layer_types else bool(hf_config.get("use_sliding_window"))
    if slides and window and window < max_positions:
        raise CheckpointError(
            f"sliding_window={window} < max_position_embeddings={max_positions} is not supported: the engine's "
            "attention has no sliding window. Convert a model whose window covers its context."
        )
    if _moe_layers(hf_config) and hf_config.get("norm_topk_prob"):
        raise CheckpointError(
            f"norm_topk_prob: true is not supported: {_NAME} keeps the top-k softmax weights unnormalised."
        )


def nanotron_config_from_hf(hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """Nanotron main `Qwen2Config` fields (with `moe_config` as a mapping) and the RoPE theta for a
    Hugging Face Qwen2 or Qwen2-MoE `config.json`. Raises CheckpointError for options the target
    (or the engine) cannot represent."""
    _check_supported(hf_config)
    rope_theta = rope_theta_from_hf(hf_config, _NAME)
    heads = hf_config["num_attention_heads"]
    moe_layers = _moe_layers(hf_config)
    moe_config = None
    if moe_layers:
        moe_config = {
            "num_experts": hf_config["num_experts"],
            "top_k": hf_config["num_experts_per_tok"],
            "moe_intermediate_size": hf_config["moe_intermediate_size"],
            "shared_expert_intermediate_size": hf_config["shared_expert_intermediate_size"],
            "router_aux_loss_coef": float(hf_config.get("router_aux_loss_coef", 0.001)),
            "layers": moe_layers,
            "enable_shared_expert": True,
            "token_dispatcher_type": "alltoall",
        }
    config = {
        "bos_token_id": first_id(hf_config.get("bos_token_id")),
        "eos_token_id": first_id(hf_config.get("eos_token_id")),
        "hidden_act": "silu",
        "hidden_size": hf_config["hidden_size"],
        "initializer_range": float(hf_config.get("initializer_range", 0.02)),
        "intermediate_size": hf_config["intermediate_size"],
        "is_qwen2_config": True,
        "max_position_embeddings": hf_config.get("max_position_embeddings", 32768),
        "num_attention_heads": heads,
        "num_hidden_layers": hf_config["num_hidden_layers"],
        "num_key_value_heads": hf_config.get("num_key_value_heads") or heads,
        "pad_token_id": first_id(hf_config.get("pad_token_id")),
        "rms_norm_eps": float(hf_config.get("rms_norm_eps", 1e-6)),
        "rope_theta": rope_theta,
        "rope_interleaved": False,
        "tie_word_embeddings": bool(hf_config.get("tie_word_embeddings", False)),
        "vocab_size": hf_config["vocab_size"],
        "attention_bias": bool(hf_config.get("qkv_bias", True)),
        "sliding_window_size": None,
        "log_attn_probs": False,
        "moe_config": moe_config,
    }
    return config, rope_theta


def _take(state_dict: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    try:
        return state_dict[name]
    except KeyError:
        raise CheckpointError(
            f"Weight `{name}` is missing from the checkpoint; is it a complete Qwen2 checkpoint?"
        ) from None


def _dense(hf: Mapping[str, torch.Tensor], src: str, dst: str) -> Iterator[tuple[str, torch.Tensor]]:
    """A SiLU-gated MLP (`src` `...mlp.` or `...mlp.shared_expert.`) -> Nanotron's `gate_up_proj` / `down_proj`."""
    gate_up = torch.cat([_take(hf, f"{src}gate_proj.weight"), _take(hf, f"{src}up_proj.weight")], dim=0)
    yield f"{dst}gate_up_proj.weight", gate_up
    yield f"{dst}down_proj.weight", _take(hf, f"{src}down_proj.weight")


def _experts(hf: Mapping[str, torch.Tensor], src: str, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(merged_gate_up_proj, merged_down_proj) from per-expert HF weights (the Hub layout) or from
    transformers' fused `experts.gate_up_proj` `[E, 2I, hidden]` / `experts.down_proj` `[E, hidden, I]`."""
    if f"{src}experts.gate_up_proj" in hf:
        return hf[f"{src}experts.gate_up_proj"].transpose(1, 2), _take(hf, f"{src}experts.down_proj").transpose(1, 2)
    gate_up, down = [], []
    for e in range(num_experts):
        expert = f"{src}experts.{e}."
        gate_up.append(torch.cat([_take(hf, f"{expert}gate_proj.weight"), _take(hf, f"{expert}up_proj.weight")]).T)
        down.append(_take(hf, f"{expert}down_proj.weight").T)
    return torch.stack(gate_up), torch.stack(down)


def iter_hf_to_nanotron(
    hf: Mapping[str, torch.Tensor], config: Mapping[str, Any]
) -> Iterator[tuple[str, torch.Tensor]]:
    """Hugging Face Qwen2 / Qwen2-MoE weights -> full (unsharded) Nanotron main `Qwen2ForTraining` weights."""
    embedding = _take(hf, "model.embed_tokens.weight")
    yield "model.token_position_embeddings.pp_block.token_embedding.weight", embedding
    lm_head = embedding if config["tie_word_embeddings"] else _take(hf, "lm_head.weight")
    yield "model.lm_head.pp_block.weight", lm_head
    del embedding, lm_head
    yield "model.final_layer_norm.pp_block.weight", _take(hf, "model.norm.weight")
    moe = config["moe_config"]
    moe_layers = set(moe["layers"]) if moe else set()
    parts = ("weight", "bias") if config["attention_bias"] else ("weight",)
    for i in range(config["num_hidden_layers"]):
        src, dst = _HF_LAYER.format(i=i), _NT_LAYER.format(i=i)
        for part in parts:
            q, k, v = (_take(hf, f"{src}self_attn.{name}_proj.{part}") for name in ("q", "k", "v"))
            yield f"{dst}attn.qkv_proj.{part}", torch.cat([q, k, v], dim=0)
        yield f"{dst}attn.o_proj.weight", _take(hf, f"{src}self_attn.o_proj.weight")
        yield f"{dst}input_layernorm.weight", _take(hf, f"{src}input_layernorm.weight")
        yield f"{dst}post_attention_layernorm.weight", _take(hf, f"{src}post_attention_layernorm.weight")
        if i not in moe_layers:
            yield from _dense(hf, f"{src}mlp.", f"{dst}mlp.")
            continue
        yield f"{dst}mlp.router.weight", _take(hf, f"{src}mlp.gate.weight")
        gate_up, down = _experts(hf, f"{src}mlp.", moe["num_experts"])
        yield f"{dst}mlp.experts.merged_gate_up_proj", gate_up
        yield f"{dst}mlp.experts.merged_down_proj", down
        yield from _dense(hf, f"{src}mlp.shared_expert.", f"{dst}mlp.shared_expert.")
        yield f"{dst}mlp.shared_expert_gate.weight", _take(hf, f"{src}mlp.shared_expert_gate.weight")


class Qwen2Conversion(HfConversion):
    title = "Qwen2"
    model_types = ("qwen2", "qwen2_moe")
    architectures = ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM")

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
        """Both rotate halves (`rope_interleaved: false`): no row is permuted."""
        return iter_hf_to_nanotron(hf_weights, model_config)
