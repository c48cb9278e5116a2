"""Rebuild a byte-level BPE tokenizer from GGUF metadata (tokens, merges, token types, special ids).

llama.cpp names the text pre-splitting rule of each vocabulary (`tokenizer.ggml.pre`); the ones
rebuilt here are GPT-2's regex and the family that first splits every digit on its own (SmolLM,
StarCoder, ...). Other rules raise CheckpointError: pass a Hugging Face tokenizer folder instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from lighteval_nanotron.convert.gguf_source import field
from lighteval_nanotron.errors import CheckpointError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

_CONTROL, _USER_DEFINED = 3, 4
_GPT2_PRE = {"gpt-2", "gpt2"}
_DIGITS_THEN_GPT2_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}


def _pre_tokenizer(pre: str) -> pre_tokenizers.PreTokenizer:
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in _GPT2_PRE:
        return byte_level
    if pre in _DIGITS_THEN_GPT2_PRE:
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    raise CheckpointError(
        f"GGUF pre-tokenizer {pre!r} is not supported (supported: {sorted(_GPT2_PRE | _DIGITS_THEN_GPT2_PRE)}). "
        "Pass --tokenizer with a Hugging Face tokenizer folder for this model."
    )


def _post_processor(reader: Any, tokens: list[str]) -> processors.PostProcessor:
    byte_level = processors.ByteLevel(trim_offsets=False)
    bos_id, eos_id = field(reader, "tokenizer.ggml.bos_token_id"), field(reader, "tokenizer.ggml.eos_token_id")
    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token", False)) and bos_id is not None
    add_eos = bool(field(reader, "tokenizer.ggml.add_eos_token", False)) and eos_id is not None
    if not (add_bos or add_eos):
        return byte_level
    bos, eos = (f"{tokens[bos_id]} " if add_bos else ""), (f" {tokens[eos_id]}" if add_eos else "")
    specials = [(tokens[i], i) for i, on in ((bos_id, add_bos), (eos_id, add_eos)) if on]
    template = processors.TemplateProcessing(
        single=f"{bos}$A{eos}", pair=f"{bos}$A{eos} {bos}$B:1{eos}".replace("  ", " "), special_tokens=specials
    )
    return processors.Sequence([byte_level, template])


def tokenizer_from_gguf(reader: Any) -> PreTrainedTokenizerFast:
    """A `PreTrainedTokenizerFast` equal to the vocabulary embedded in the GGUF file."""
    from transformers import PreTrainedTokenizerFast

    kind = field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise CheckpointError(
            f"GGUF tokenizer model {kind!r} cannot be rebuilt (only byte-level BPE, `gpt2`). "
            "Pass --tokenizer with a Hugging Face tokenizer folder for this model."
        )
    tokens: list[str] = field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(merge.split(" ", 1)) for merge in field(reader, "tokenizer.ggml.merges", [])]
    token_types: list[int] = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)

    tokenizer = Tokenizer(models.BPE(vocab={tok: i for i, tok in enumerate(tokens)}, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = _pre_tokenizer(field(reader, "tokenizer.ggml.pre", "gpt-2"))
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = _post_processor(reader, tokens)
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, kind in zip(tokens, token_types) if kind == _CONTROL]
    )
    tokenizer.add_tokens(
        [
            AddedToken(t, special=False, normalized=False)
            for t, kind in zip(tokens, token_types)
            if kind == _USER_DEFINED
        ]
    )

    def token(key: str) -> str | None:
        index = field(reader, f"tokenizer.ggml.{key}_token_id")
        return None if index is None else tokens[index]

    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=token("bos"),
        eos_token=token("eos"),
        unk_token=token("unknown"),
        pad_token=token("padding"),
        chat_template=field(reader, "tokenizer.chat_template"),
        model_max_length=int(field(reader, "llama.context_length", 2048)),
        clean_up_tokenization_spaces=False,
    )
