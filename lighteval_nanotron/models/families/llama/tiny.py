"""Tiny Llama models for tests: Nanotron's `LlamaConfig` and a random Hugging Face `LlamaForCausalLM`."""

from __future__ import annotations

from typing import Any

import torch

from lighteval_nanotron.models.families.tiny_vocab import EOS_ID, VOCAB_SIZE
from lighteval_nanotron.nanotron_compat.imports import import_nanotron


def tiny_llama_config(**overrides: Any) -> Any:
    """Nanotron LlamaConfig: 4 layers, hidden 64, 4 heads, 2 KV heads, tied embeddings, vocab 1024."""
    values = dict(
        bos_token_id=EOS_ID,
        eos_token_id=EOS_ID,
        hidden_act="silu",
        hidden_size=64,
        initializer_range=0.02,
        intermediate_size=128,
        max_position_embeddings=256,
        num_attention_heads=4,
        num_hidden_layers=4,
        num_key_value_heads=2,
        pad_token_id=None,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        vocab_size=VOCAB_SIZE,
    )
    values.update(overrides)
    return import_nanotron().LlamaConfig(**values)


def tiny_hf_llama(seed: int = 0, **overrides: Any) -> Any:
    """A random Hugging Face `LlamaForCausalLM` in fp32 eval mode: 2 layers, hidden 64, 4 query and
    2 KV heads (GQA), RoPE theta 50000 (not Nanotron 0.4's 10000, so a converter must carry it)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_theta=50000.0,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**{**fields, **overrides})).eval()
