"""The tokenizer against the model's vocabulary: every id the engine feeds or scores must be a row
of the model's embedding and a column of its `lm_head`.

A token id at or past the model's `vocab_size` is not an error Nanotron reports: at TP1 the
embedding raises a bare `IndexError`, at TP > 1 each shard masks ids it does not own, so such an
id is embedded as a zero vector and the evaluation runs on, wrongly; and the log-probability of a
target no shard owns would be made up (see `parallel.vocab_parallel.target_logprobs`). So the
tokenizer is checked when the engine is built (its size and its special ids), and every tokenized
request when it is prepared, on every rank together, before any forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lighteval_nanotron.errors import ConfigError


def tokenizer_size(tokenizer: Any) -> int | None:
    """How many ids the tokenizer can produce: one more than its largest id, added tokens
    included (None when the object does not say). Works for transformers tokenizers,
    `tokenizers.Tokenizer` and this package's `FastTokenizer`."""
    sizes: list[int] = []
    vocab = _vocab(tokenizer)
    if vocab:
        sizes.append(max(vocab.values()) + 1)
    try:
        sizes.append(len(tokenizer))
    except TypeError:
        pass
    return max(sizes) if sizes else None


def _vocab(tokenizer: Any) -> dict[str, int] | None:
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if get_vocab is None:
        return None
    try:
        return get_vocab(with_added_tokens=True)  # tokenizers.Tokenizer, FastTokenizer
    except TypeError:
        return get_vocab()  # transformers: added tokens included


def _name(tokenizer: Any) -> str:
    name = getattr(tokenizer, "name_or_path", None)
    return f"The tokenizer {name!r}" if name else "The tokenizer"


def check_tokenizer_fits(tokenizer: Any, special_ids: dict[str, int | None], vocab_size: int) -> None:
    """Raise ConfigError, naming both sizes and the fix, when the tokenizer can produce an id the
    model has no row for, or one of its special tokens (BOS, EOS, padding) is such an id."""
    size = tokenizer_size(tokenizer)
    if size is not None and size > vocab_size:
        raise ConfigError(
            f"{_name(tokenizer)} has {size} token ids (0..{size - 1}) but the model's vocabulary has {vocab_size} "
            f"(its config's vocab_size): ids >= {vocab_size} have no embedding row and no logit, so they would be "
            "embedded as zero vectors under tensor parallelism (an IndexError at TP1) and scored with made-up "
            "log-probabilities. Use the tokenizer the model was trained with (eval --tokenizer, or the training "
            f"config's tokenizer.tokenizer_name_or_path), or a model whose vocab_size is at least {size}."
        )
    bad = {name: value for name, value in special_ids.items() if value is not None and not 0 <= value < vocab_size}
    if bad:
        listed = ", ".join(f"{name} {value}" for name, value in bad.items())
        raise ConfigError(
            f"{_name(tokenizer)}'s special token id(s) {listed} are outside the model's vocabulary of {vocab_size} "
            "ids (its config's vocab_size): use the tokenizer the model was trained with, or fix its "
            "special tokens."
        )


def check_token_ids(sequences: Sequence[Sequence[int]], vocab_size: int, describe: Callable[[int], str]) -> None:
    """Raise ConfigError when an id of `sequences` (the tokens of prepared requests) is not an id of
    the model's vocabulary `[0, vocab_size)`; `describe(k)` names the request of `sequences[k]`."""
    low = min((min(ids) for ids in sequences if ids), default=0)
    high = max((max(ids) for ids in sequences if ids), default=0)
    if low >= 0 and high < vocab_size:
        return
    index = next(k for k, ids in enumerate(sequences) if ids and not 0 <= min(ids) <= max(ids) < vocab_size)
    wrong = next(token for token in sequences[index] if not 0 <= token < vocab_size)
    raise ConfigError(
        f"{describe(index)}: token id {wrong} is outside the model's vocabulary of {vocab_size} ids (its config's "
        "vocab_size); it would be embedded as a zero vector (or crash) and scored with a made-up log-probability. "
        "Use the tokenizer the model was trained with (eval --tokenizer, or the training config's "
        "tokenizer.tokenizer_name_or_path)."
    )
