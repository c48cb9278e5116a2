"""Read a GGUF Llama file (llama.cpp's format) as a Hugging Face Llama config and state dict.

Quantized tensors are dequantized with `gguf.quants.dequantize`. llama.cpp stores the rows of each
`attn_q` / `attn_k` head interleaved (its converter's `permute`); they are put back in the Hugging
Face half-split order here, so the result loads into transformers' `LlamaForCausalLM` as is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch
from gguf import quants

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families.base import DEFAULT_ROPE_THETA
from lighteval_nanotron.models.families.llama.conversion import deinterleave_rotary

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def open_gguf(path: Path) -> gguf.GGUFReader:
    """A memory-mapped reader of the file; raises CheckpointError if it is missing or not GGUF."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"GGUF file {path} not found.")
    try:
        return gguf.GGUFReader(path)
    except (ValueError, OSError) as err:
        raise CheckpointError(f"{path} is not a readable GGUF file ({err}).") from err


def field(reader: Any, key: str, default: Any = None) -> Any:
    """A metadata value (strings, numbers, lists) or `default` when the key is absent."""
    item = reader.fields.get(key)
    return default if item is None else item.contents()


def supported_tensor_types() -> set[str]:
    """GGML tensor types `gguf.quants.dequantize` can decode in the installed `gguf` version."""
    return {"F32", "F16"} | {qtype.name for qtype in quants._type_traits}


def hf_config_from_gguf(reader: Any) -> dict[str, Any]:
    """A Hugging Face Llama `config.json` dict from the file's metadata."""
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise CheckpointError(f"GGUF architecture {arch!r} is not supported: only `llama` files can be converted.")
    scaling = field(reader, "llama.rope.scaling.type", "none")
    tensor_names = {tensor.name for tensor in reader.tensors}
    if scaling not in ("none", "") or "rope_freqs.weight" in tensor_names:
        raise CheckpointError("This GGUF uses RoPE scaling, which Nanotron 0.4's Llama does not support.")
    hidden, heads = int(field(reader, "llama.embedding_length")), int(field(reader, "llama.attention.head_count"))
    rope_dim = field(reader, "llama.rope.dimension_count")
    if rope_dim is not None and int(rope_dim) != hidden // heads:
        raise CheckpointError(
            f"Partial RoPE (rope dimension {rope_dim} != head dim {hidden // heads}) is not supported."
        )
    tokens = field(reader, "tokenizer.ggml.tokens")
    vocab = field(reader, "llama.vocab_size") or (len(tokens) if tokens is not None else None)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(reader, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, "llama.attention.head_count_kv", heads)),
        "max_position_embeddings": int(field(reader, "llama.context_length", 2048)),
        "rms_norm_eps": float(str(np.float32(field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)))),
        "rope_theta": float(field(reader, "llama.rope.freq_base", DEFAULT_ROPE_THETA)),
        "vocab_size": int(vocab),
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "hidden_act": "silu",
        "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": field(reader, "tokenizer.ggml.padding_token_id"),
    }


def _hf_name(gguf_name: str) -> str | None:
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    return None


def check_tensor_types(reader: Any) -> None:
    """Raise CheckpointError naming every GGML tensor type in the file that cannot be dequantized."""
    supported = supported_tensor_types()
    bad = sorted({tensor.tensor_type.name for tensor in reader.tensors} - supported)
    if bad:
        raise CheckpointError(
            f"GGUF tensor types {bad} cannot be dequantized by the installed `gguf` package "
            f"(supported: {sorted(supported)}). Upgrade `gguf` or use a file quantized with a supported type."
        )


class GGUFWeights(Mapping[str, torch.Tensor]):
    """The file's weights under Hugging Face Llama names, dequantized to `dtype` when read.

    q/k rows come back in Hugging Face order. Nothing is decoded until a name is looked up, and
    nothing is cached: each lookup decodes again.
    """

    def __init__(self, reader: Any, config: dict[str, Any], dtype: torch.dtype):
        check_tensor_types(reader)
        self._tensors = {}
        for tensor in reader.tensors:
            name = _hf_name(tensor.name)
            if name is None:
                raise CheckpointError(
                    f"Unexpected tensor {tensor.name!r} in a llama GGUF: cannot map it to a Llama weight."
                )
            self._tensors[name] = tensor
        self._heads = {"q_proj": config["num_attention_heads"], "k_proj": config["num_key_value_heads"]}
        self._dtype = dtype

    def __getitem__(self, name: str) -> torch.Tensor:
        tensor = self._tensors[name]
        array = np.asarray(quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if not (array.flags.writeable and array.flags.c_contiguous):  # F32 tensors are views of the mmap
            array = np.array(array, order="C")
        weight = torch.from_numpy(array).to(self._dtype)
        projection = name.rsplit(".", 2)[-2]
        if projection in self._heads:
            weight = deinterleave_rotary(weight, self._heads[projection]).contiguous()
        return weight

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)
