"""Pure mapping between Hugging Face Llama and Nanotron 0.4 `LlamaForTraining`: config and weights
(`LlamaConversion` is what `lighteval-nanotron convert` calls; `nanotron_to_hf` uses the reverse).

Two layout differences matter besides the names:

- Nanotron fuses `q_proj`, `k_proj`, `v_proj` into `qkv_proj` (q rows, then k rows, then v rows) and
  `gate_proj`, `up_proj` into `gate_up_proj` (gate rows, then up rows).
- Nanotron 0.4 applies rotary embeddings to interleaved pairs `(x0, x1), (x2, x3), ...` (GPT-J style,
  `interleaved=True`), Hugging Face to the two halves of each head (GPT-NeoX style). The rows of each
  q/k head are therefore permuted: HF row `j` (first half) and `j + d/2` (second half) become
  Nanotron rows `2j` and `2j + 1`. A checkpoint recording `rope_interleaved: false` (current
  Nanotron's layout) keeps Hugging Face's order (`interleaved=False`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families.base import DEFAULT_ROPE_THETA, ROPE_THETA_KEY
from lighteval_nanotron.models.families.hf_conversion import HfConversion, first_id, rope_theta_from_hf

# Nanotron 0.4 parameter names (LlamaForTraining.state_dict()).
NT_EMBED = "model.token_position_embeddings.pp_block.token_embedding.weight"
NT_FINAL_NORM = "model.final_layer_norm.pp_block.weight"
NT_LM_HEAD = "model.lm_head.pp_block.weight"
_NT_LAYER = "model.decoder.{i}.pp_block."

HF_EMBED = "model.embed_tokens.weight"
HF_FINAL_NORM = "model.norm.weight"
HF_LM_HEAD = "lm_head.weight"
_HF_LAYER = "model.layers.{i}."


@dataclass(frozen=True)
class LlamaShape:
    """The numbers the weight mapping needs (a subset of the model config)."""

    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    tie_word_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def from_nanotron_config(cls, config: Mapping[str, Any]) -> LlamaShape:
        return cls(
            num_layers=config["num_hidden_layers"],
            hidden_size=config["hidden_size"],
            num_heads=config["num_attention_heads"],
            num_kv_heads=config.get("num_key_value_heads") or config["num_attention_heads"],
            tie_word_embeddings=config["tie_word_embeddings"],
        )


def nanotron_config_from_hf(hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """Nanotron 0.4 `LlamaConfig` fields and the RoPE theta for a Hugging Face Llama `config.json`.

    Raises CheckpointError for architectures or options Nanotron 0.4's Llama cannot represent.
    """
    if not LlamaConversion.recognises(hf_config):
        raise CheckpointError(
            f"Only Llama checkpoints convert with the Llama mapping, got model_type={hf_config.get('model_type')!r} "
            f"architectures={hf_config.get('architectures') or []}. Convert a LlamaForCausalLM checkpoint."
        )
    for flag in ("attention_bias", "mlp_bias"):
        if hf_config.get(flag):
            raise CheckpointError(f"`{flag}: true` is not supported: Nanotron 0.4's Llama has no biases.")
    hidden, heads = hf_config["hidden_size"], hf_config["num_attention_heads"]
    head_dim = hf_config.get("head_dim") or hidden // heads
    if head_dim * heads != hidden:
        raise CheckpointError(
            f"head_dim={head_dim} x num_attention_heads={heads} != hidden_size={hidden}: Nanotron 0.4's Llama "
            "requires head_dim = hidden_size / num_attention_heads."
        )
    config = {
        "bos_token_id": first_id(hf_config.get("bos_token_id")),
        "eos_token_id": first_id(hf_config.get("eos_token_id")),
        "hidden_act": hf_config.get("hidden_act", "silu"),
        "hidden_size": hidden,
        "initializer_range": float(hf_config.get("initializer_range", 0.02)),
        "intermediate_size": hf_config["intermediate_size"],
        "is_llama_config": True,
        "max_position_embeddings": hf_config.get("max_position_embeddings", 2048),
        "num_attention_heads": heads,
        "num_hidden_layers": hf_config["num_hidden_layers"],
        "num_key_value_heads": hf_config.get("num_key_value_heads") or heads,
        "pad_token_id": first_id(hf_config.get("pad_token_id")),
        "pretraining_tp": 1,
        "rms_norm_eps": float(hf_config.get("rms_norm_eps", 1e-6)),
        "rope_scaling": None,
        "tie_word_embeddings": bool(hf_config.get("tie_word_embeddings", False)),
        "use_cache": True,
        "vocab_size": hf_config["vocab_size"],
    }
    return config, rope_theta_from_hf(hf_config, "Nanotron 0.4's Llama")


def hf_config_from_nanotron(config: Mapping[str, Any], rope_theta: float = DEFAULT_ROPE_THETA) -> dict[str, Any]:
    """A Hugging Face `LlamaConfig` dict for a Nanotron Llama config (the reverse of `nanotron_config_from_hf`)."""
    keys = (
        "bos_token_id", "eos_token_id", "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
        "max_position_embeddings", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
        "pad_token_id", "rms_norm_eps", "tie_word_embeddings", "vocab_size",
    )  # fmt: skip
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **{key: config[key] for key in keys},
        "rope_theta": rope_theta,
        "attention_bias": False,
        "mlp_bias": False,
    }


def interleave_rotary(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """HF (half-split) q/k rows -> Nanotron 0.4 (interleaved) rows, per head."""
    rows, cols = weight.shape
    head_dim = rows // num_heads
    return weight.reshape(num_heads, 2, head_dim // 2, cols).transpose(1, 2).reshape(rows, cols)


def deinterleave_rotary(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Nanotron 0.4 (interleaved) q/k rows -> HF (half-split) rows, per head."""
    rows, cols = weight.shape
    head_dim = rows // num_heads
    return weight.reshape(num_heads, head_dim // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def _take(state_dict: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    try:
        return state_dict[name]
    except KeyError:
        raise CheckpointError(
            f"Weight `{name}` is missing from the checkpoint; is it a complete Llama checkpoint?"
        ) from None


def _qk_rows(weight: torch.Tensor, num_heads: int, interleaved: bool) -> torch.Tensor:
    return interleave_rotary(weight, num_heads) if interleaved else weight


def iter_hf_to_nanotron(
    hf: Mapping[str, torch.Tensor], shape: LlamaShape, interleaved: bool = True
) -> Iterator[tuple[str, torch.Tensor]]:
    """Hugging Face Llama weights -> full (unsharded) Nanotron 0.4 `LlamaForTraining` weights, one at a time,
    q/k rows laid out for interleaved rotary pairs (`interleaved`, 0.4's layout) or Hugging Face's halves.

    Each source tensor is read once, so a lazy `hf` mapping (GGUF or safetensors on disk) keeps at
    most one layer's tensors in memory. Tied models get the embedding under both the embedding and
    the lm_head name, as in Nanotron's own state dict.
    """
    embedding = _take(hf, HF_EMBED)
    yield NT_EMBED, embedding
    yield NT_LM_HEAD, embedding if shape.tie_word_embeddings else _take(hf, HF_LM_HEAD)
    del embedding
    yield NT_FINAL_NORM, _take(hf, HF_FINAL_NORM)
    for i in range(shape.num_layers):
        src, dst = _HF_LAYER.format(i=i), _NT_LAYER.format(i=i)
        q = _qk_rows(_take(hf, src + "self_attn.q_proj.weight"), shape.num_heads, interleaved)
        k = _qk_rows(_take(hf, src + "self_attn.k_proj.weight"), shape.num_kv_heads, interleaved)
        yield dst + "attn.qkv_proj.weight", torch.cat([q, k, _take(hf, src + "self_attn.v_proj.weight")], dim=0)
        del q, k
        yield dst + "attn.o_proj.weight", _take(hf, src + "self_attn.o_proj.weight")
        gate_up = [_take(hf, src + "mlp.gate_proj.weight"), _take(hf, src + "mlp.up_proj.weight")]
        yield dst + "mlp.gate_up_proj.weight", torch.cat(gate_up, dim=0)
        del gate_up
        yield dst + "mlp.down_proj.weight", _take(hf, src + "mlp.down_proj.weight")
        yield dst + "input_layernorm.weight", _take(hf, src + "input_layernorm.weight")
        yield dst + "post_attention_layernorm.weight", _take(hf, src + "post_attention_layernorm.weight")


def hf_to_nanotron_state_dict(hf: Mapping[str, torch.Tensor], shape: LlamaShape) -> dict[str, torch.Tensor]:
    """`iter_hf_to_nanotron` collected into a dict."""
    return dict(iter_hf_to_nanotron(hf, shape))


def nanotron_to_hf_state_dict(
    nt: Mapping[str, torch.Tensor], shape: LlamaShape, interleaved: bool = True
) -> dict[str, torch.Tensor]:
    """Full Nanotron Llama weights (q/k rows for interleaved pairs, or Hugging Face's halves when not
    `interleaved`) -> Hugging Face `LlamaForCausalLM` weights (with `lm_head.weight`)."""
    out = {HF_EMBED: _take(nt, NT_EMBED), HF_FINAL_NORM: _take(nt, NT_FINAL_NORM)}
    out[HF_LM_HEAD] = out[HF_EMBED] if shape.tie_word_embeddings else _take(nt, NT_LM_HEAD)
    q_rows, kv_rows = shape.num_heads * shape.head_dim, shape.num_kv_heads * shape.head_dim
    for i in range(shape.num_layers):
        src, dst = _NT_LAYER.format(i=i), _HF_LAYER.format(i=i)
        q, k, v = torch.split(_take(nt, src + "attn.qkv_proj.weight"), [q_rows, kv_rows, kv_rows], dim=0)
        out[dst + "self_attn.q_proj.weight"] = deinterleave_rotary(q, shape.num_heads) if interleaved else q
        out[dst + "self_attn.k_proj.weight"] = deinterleave_rotary(k, shape.num_kv_heads) if interleaved else k
        out[dst + "self_attn.v_proj.weight"] = v
        out[dst + "self_attn.o_proj.weight"] = _take(nt, src + "attn.o_proj.weight")
        gate, up = torch.chunk(_take(nt, src + "mlp.gate_up_proj.weight"), 2, dim=0)
        out[dst + "mlp.gate_proj.weight"], out[dst + "mlp.up_proj.weight"] = gate, up
        out[dst + "mlp.down_proj.weight"] = _take(nt, src + "mlp.down_proj.weight")
        out[dst + "input_layernorm.weight"] = _take(nt, src + "input_layernorm.weight")
        out[dst + "post_attention_layernorm.weight"] = _take(nt, src + "post_attention_layernorm.weight")
    return out


class LlamaConversion(HfConversion):
    title = "Llama"
    model_types = ("llama",)
    architectures = ("LlamaForCausalLM",)

    @classmethod
    def nanotron_config(cls, hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        return nanotron_config_from_hf(hf_config)

    @classmethod
    def recorded_fields(cls, model_config: Mapping[str, Any], rope_theta: float) -> dict[str, Any]:
        """0.4's `LlamaConfig` has no RoPE base: it is recorded beside the config's fields."""
        return {**model_config, ROPE_THETA_KEY: rope_theta}

    @classmethod
    def weights(
        cls,
        hf_weights: Mapping[str, torch.Tensor],
        model_config: Mapping[str, Any],
        rotary_layout: tuple[float, bool] | None,
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """q/k rows laid out for the recorded pair layout (a Llama config always records one)."""
        _, interleaved = rotary_layout
        return iter_hf_to_nanotron(hf_weights, LlamaShape.from_nanotron_config(model_config), interleaved)
