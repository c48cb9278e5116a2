"""Tiny Starcoder2 models for tests: Nanotron's `Starcoder2Config` and a random Hugging Face
`Starcoder2ForCausalLM`."""

from __future__ import annotations

from typing import Any

import torch

from lighteval_nanotron.models.families.tiny_vocab import EOS_ID, VOCAB_SIZE
from lighteval_nanotron.nanotron_compat.imports import import_nanotron


def tiny_starcoder2_config(**overrides: Any) -> Any:
    """Nanotron Starcoder2Config: 4 layers, hidden 64, 4 heads, grouped-query with 2 KV heads (pass
    `multi_query=True, grouped_query=False` for multi-query), RoPE theta 50000, no dropout, vocab 1024."""
    values = dict(
        activation_function="gelu_pytorch_tanh",
        attn_pdrop=0.0,
        embd_pdrop=0.0,
        resid_pdrop=0.0,
        bos_token_id=EOS_ID,
        eos_token_id=EOS_ID,
        grouped_query=True,
        multi_query=False,
        num_kv_heads=2,
        hidden_size=64,
        intermediate_size=128,
        layer_norm_epsilon=1e-5,
        max_position_embeddings=256,
        num_attention_heads=4,
        num_hidden_layers=4,
        rope_theta=50000,
        sliding_window_size=None,
        vocab_size=VOCAB_SIZE,
    )
    values.update(overrides)
    return import_nanotron().Starcoder2Config(**values)


def tiny_hf_starcoder2(kv_heads: int, tie: bool = True, seed: int = 0) -> Any:
    """A random Starcoder2ForCausalLM in fp32 eval mode: 2 layers, hidden 64, 4 query heads,
    RoPE theta 50000, weights scaled up so that choices score differently."""
    from transformers import Starcoder2Config, Starcoder2ForCausalLM

    config = Starcoder2Config(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv_heads, max_position_embeddings=512, rope_theta=50000.0, sliding_window=None,
        tie_word_embeddings=tie, bos_token_id=EOS_ID, eos_token_id=EOS_ID,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = Starcoder2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(0.1 * torch.randn_like(param))  # visible norm weights and biases
            else:
                param.add_(0.05 * torch.randn_like(param)).mul_(4.0)  # non-zero biases, larger weights
    return model
