"""A tiny random Hugging Face Llama with a real (GPT-2, 1024-token) tokenizer, converted to a
Nanotron checkpoint with the project's converter, and transformers' log-likelihoods to check
evaluation results against."""

from __future__ import annotations

from pathlib import Path

import torch

from lighteval_nanotron.models.families.llama.tiny import tiny_hf_llama as random_hf_llama
from tests.helpers.tiers import reaches
from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer

ROPE_THETA = 50000.0  # not Nanotron 0.4's 10000: the loader must apply the converted rope_theta


def tiny_hf_llama(seed: int = 0) -> "transformers.LlamaForCausalLM":  # noqa: F821
    """A random GQA Llama (2 layers, 4 query / 2 KV heads, tied embeddings) in fp32 eval mode."""
    model = random_hf_llama(
        seed,
        vocab_size=VOCAB_SIZE,
        max_position_embeddings=512,
        rope_theta=ROPE_THETA,
        tie_word_embeddings=True,
        bos_token_id=VOCAB_SIZE - 1,
        eos_token_id=VOCAB_SIZE - 1,
    )
    with torch.no_grad():  # larger weights than the default init, so log-probs differ between choices
        for name, param in model.named_parameters():
            param.mul_(1.0 if name.endswith("norm.weight") else 8.0)
    return model


@reaches("distributed")  # conversion starts a one-process gloo group
def convert_tiny(folder: Path, seed: int = 0) -> tuple["transformers.LlamaForCausalLM", Path]:  # noqa: F821
    """Save a tiny HF Llama and its tokenizer under `folder/hf`, convert to `folder/nanotron`."""
    from lighteval_nanotron.convert import convert_hf_to_nanotron

    model = tiny_hf_llama(seed)
    model.save_pretrained(folder / "hf")
    tiny_tokenizer().save_pretrained(folder / "hf")
    convert_hf_to_nanotron(folder / "hf", folder / "nanotron")
    return model, folder / "nanotron"


@torch.no_grad()
def transformers_logprob(model, context: list[int], continuation: list[int]) -> float:
    """Sum of log p(continuation token | everything before it), computed by transformers."""
    ids = torch.tensor([context + continuation])
    logprobs = model(ids).logits[0].double().log_softmax(-1)
    start = len(context)
    return sum(float(logprobs[start + k - 1, token]) for k, token in enumerate(continuation))
