"""Tiny Llama checkpoints for the conversion tests: a random transformers model saved as a
Hugging Face folder or as a GGUF file (llama.cpp layout), a tiny byte-level BPE tokenizer, and a
Nanotron forward of a converted checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from lighteval_nanotron.models.families.llama.tiny import tiny_hf_llama as random_hf_llama

if TYPE_CHECKING:
    import tokenizers
    import transformers

VOCAB = 320  # >= the tiny tokenizer's size, so GGUF files can carry it
TEXT = [
    "The quick brown fox jumps over the lazy dog. In 2024 there were 365 days and 12 months.",
    "Nanotron trains language models with tensor, pipeline and data parallelism on many GPUs.",
    "Evaluation runs on the live model: multiple choice, generation, log-likelihood scoring.",
] * 20


def tiny_hf_llama(tie: bool, seed: int = 0) -> transformers.LlamaForCausalLM:
    """A random GQA Llama (4 query heads, 2 KV heads, RoPE theta 50000) in fp32 eval mode."""
    model = random_hf_llama(
        seed,
        vocab_size=VOCAB,
        intermediate_size=96,
        max_position_embeddings=128,
        tie_word_embeddings=tie,
        bos_token_id=1,
        eos_token_id=2,
    )
    with torch.no_grad():  # visible norm weights, so a norm mapped to the wrong place shows
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    return model


def tiny_tokenizer() -> tokenizers.Tokenizer:
    """A byte-level BPE trained in a blink, split like SmolLM (every digit alone, then GPT-2 regex)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TEXT, trainer=trainer)
    return tokenizer


def llama_cpp_permute(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf `permute`: HF q/k rows -> the order GGUF files store."""
    return (
        weight.reshape(num_heads, 2, weight.shape[0] // num_heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def gguf_name(hf_name: str) -> str:
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    if hf_name in names:
        return names[hf_name]
    layer, rest = hf_name.removeprefix("model.layers.").split(".", 1)
    short = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }[rest]
    return f"blk.{layer}.{short}"


def quantized_weights(model, qtype_name: str) -> dict[str, torch.Tensor]:
    """The HF weights as a GGUF of this type holds them: 2-D ones quantized then dequantized."""
    import gguf

    qtype = gguf.GGMLQuantizationType[qtype_name]
    out = {}
    for name, tensor in model.state_dict().items():
        array = tensor.numpy()
        if array.ndim == 2 and qtype_name != "F32":
            array = gguf.quants.dequantize(gguf.quants.quantize(array, qtype), qtype)
        out[name] = torch.from_numpy(np.array(array, dtype=np.float32))
    return out


def write_tiny_gguf(path: Path, model, tokenizer, qtype_name: str = "F32", pre: str = "smollm") -> None:
    """Write `model` (+ `tokenizer`) as llama.cpp does: metadata, permuted q/k rows, 2-D weights in `qtype_name`."""
    import gguf

    config = model.config
    qtype = gguf.GGMLQuantizationType[qtype_name]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    tokens += [f"[PAD{i}]" for i in range(len(tokens), config.vocab_size)]
    special = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([3 if token in special else 1 for token in tokens])
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in merges])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        array = tensor.numpy().astype(np.float32)
        if name.endswith("q_proj.weight"):
            array = llama_cpp_permute(array, config.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            array = llama_cpp_permute(array, config.num_key_value_heads)
        if array.ndim == 2 and qtype_name != "F32":
            writer.add_tensor(gguf_name(name), gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(gguf_name(name), array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def nanotron_logits(folder: Path, input_ids: torch.Tensor) -> torch.Tensor:
    """Load a converted checkpoint with Nanotron at TP1/PP1 in this process; logits [batch, seq, vocab]."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.convert.nanotron_writer import single_process_context

    with single_process_context() as parallel_context:
        model, _ = load_nanotron_checkpoint(folder, parallel_context)
        model.eval()
        with torch.no_grad():
            logits = model.model(input_ids=input_ids, input_mask=torch.ones_like(input_ids, dtype=torch.bool))
    return logits.transpose(0, 1)
