"""Tiny Qwen2 models for tests: current Nanotron's `Qwen2Config` (dense or MoE) and random Hugging Face
Qwen2 and Qwen2-MoE models (fp32, eval mode)."""

from __future__ import annotations

from typing import Any

import torch

from lighteval_nanotron.models.families.tiny_vocab import EOS_ID, VOCAB_SIZE
from lighteval_nanotron.nanotron_compat.imports import import_nanotron

ROPE_THETA = 50000.0


def tiny_qwen2_config(moe: bool = False, **overrides: Any) -> Any:
    """Current Nanotron's Qwen2Config: hidden 64, 4 query / 2 KV heads, biased q/k/v, RoPE theta 50000;
    dense: 2 layers, tied embeddings; `moe`: 3 layers, layers 0 and 2 mixtures of 4 experts (top-2,
    a shared expert), untied."""
    nanotron_config = import_nanotron()
    moe_config = None
    if moe:
        moe_config = nanotron_config.MoEConfig(
            num_experts=4, top_k=2, moe_intermediate_size=32, shared_expert_intermediate_size=48, layers=[0, 2],
            enable_shared_expert=True,
        )  # fmt: skip
    return nanotron_config.Qwen2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3 if moe else 2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB_SIZE, max_position_embeddings=512, rope_theta=ROPE_THETA,
        attention_bias=True, tie_word_embeddings=not moe, bos_token_id=EOS_ID, eos_token_id=EOS_ID,
        moe_config=moe_config, **overrides,
    )  # fmt: skip


def _scaled(model):
    """Larger weights and visible norms and biases, so choices score differently."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(0.1 * torch.randn_like(param))
            else:
                param.add_(0.05 * torch.randn_like(param)).mul_(4.0)
    return model.eval()


def tiny_hf_qwen2(tie: bool = True, seed: int = 0, **overrides):
    """A random Qwen2ForCausalLM: 2 layers, hidden 64, 4 query / 2 KV heads, biased q/k/v."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    fields = dict(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, rope_theta=ROPE_THETA, tie_word_embeddings=tie,
        bos_token_id=EOS_ID, eos_token_id=EOS_ID,
    )  # fmt: skip
    torch.manual_seed(seed)
    return _scaled(Qwen2ForCausalLM(Qwen2Config(**{**fields, **overrides})))


def tiny_hf_qwen2_moe(seed: int = 0, **overrides):
    """A random Qwen2MoeForCausalLM: 3 layers (layer 1 dense through `mlp_only_layers`), 4 experts,
    top-2 (unnormalised, as Qwen1.5-MoE), a shared expert."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    fields = dict(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
        num_hidden_layers=3, mlp_only_layers=[1], num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, rope_theta=ROPE_THETA, tie_word_embeddings=False,
        bos_token_id=EOS_ID, eos_token_id=EOS_ID,
    )  # fmt: skip
    torch.manual_seed(seed)
    return _scaled(Qwen2MoeForCausalLM(Qwen2MoeConfig(**{**fields, **overrides})))
