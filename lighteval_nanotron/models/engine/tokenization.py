"""Pure tokenization helpers: one tokenizer interface, context/continuation splitting as
lighteval does it, and the windows of a rolling log-likelihood."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.errors import ConfigError


class TokenizerAdapter:
    """The four things the engine needs from a `transformers` or a `tokenizers` tokenizer."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._fast = not hasattr(tokenizer, "convert_tokens_to_ids")  # a bare `tokenizers.Tokenizer`
        self._batched: dict[tuple[str, bool], list[int]] = {}
        self.eos_token_id = self._special_id("eos_token_id", ("</s>", "<|endoftext|>", "<eos>", "<|im_end|>"))
        self.bos_token_id = self._special_id("bos_token_id", ("<s>", "<|startoftext|>", "<bos>"))
        self.pad_token_id = getattr(tokenizer, "pad_token_id", None) if not self._fast else None

    def _special_id(self, attribute: str, names: tuple[str, ...]) -> int | None:
        if not self._fast:
            return getattr(self.tokenizer, attribute, None)
        for name in names:
            token_id = self.tokenizer.token_to_id(name)
            if token_id is not None:
                return token_id
        return None

    @property
    def prefix_token_id(self) -> int:
        """The token that stands for "no context": BOS if the tokenizer has one, else EOS."""
        token_id = self.bos_token_id if self.bos_token_id is not None else self.eos_token_id
        if token_id is None:
            raise ConfigError("The tokenizer has neither a BOS nor an EOS token: empty contexts cannot be scored.")
        return token_id

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        known = self._batched.get((text, add_special_tokens))
        if known is not None:
            return list(known)
        if self._fast:
            return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def _encode_many(self, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        """The same ids as `encode` text by text, in one batch call of a fast tokenizer."""
        if self._fast:
            return [list(e.ids) for e in self.tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)]
        if getattr(self.tokenizer, "is_fast", False):
            encoded = self.tokenizer(texts, add_special_tokens=add_special_tokens, return_attention_mask=False)
            return [list(ids) for ids in encoded["input_ids"]]
        return [list(self.tokenizer.encode(t, add_special_tokens=add_special_tokens)) for t in texts]

    @contextlib.contextmanager
    def batched(self, requests: Iterable[tuple[str, bool]]) -> Iterator[None]:
        """Within this block, `encode` of any `(text, add_special_tokens)` of `requests` is a
        look-up: they are all encoded up front, once each, in one batch call per flag (a fast
        tokenizer runs it in Rust, on several threads)."""
        by_flag: dict[bool, list[str]] = {}
        for text, flag in dict.fromkeys(requests):
            by_flag.setdefault(flag, []).append(text)
        for flag, texts in by_flag.items():
            self._batched.update(((t, flag), ids) for t, ids in zip(texts, self._encode_many(texts, flag)))
        try:
            yield
        finally:
            self._batched.clear()

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


def _whitespace_moved(context: str, continuation: str) -> tuple[str, str]:
    stripped = context.rstrip()
    if len(stripped) < len(context):
        return stripped, context[len(stripped) :] + continuation
    return context, continuation


def pair_texts(context: str, continuation: str, add_special_tokens: bool, pairwise: bool) -> list[tuple[str, bool]]:
    """The `(text, add_special_tokens)` encodings `encode_pair` makes (to batch them up front)."""
    context, continuation = _whitespace_moved(context, continuation)
    if not context:
        return [(continuation, False)]
    if pairwise:
        return [(context, add_special_tokens), (continuation, False)]
    return [(context, add_special_tokens), (context + continuation, add_special_tokens)]


def encode_pair(
    tok: TokenizerAdapter,
    context: str,
    continuation: str,
    add_special_tokens: bool,
    pairwise: bool,
) -> tuple[list[int], list[int]]:
    """Context and continuation tokens, lighteval-style.

    Trailing whitespace of the context moves to the start of the continuation. An empty context
    becomes the prefix token. Joint mode tokenizes `context + continuation` and splits it at the
    context's own token count (keeping at least one continuation token); pairwise mode encodes the
    two separately (no special tokens on the continuation, a trailing EOS dropped from the context).
    """
    context, continuation = _whitespace_moved(context, continuation)
    if not context:
        return [tok.prefix_token_id], tok.encode(continuation, add_special_tokens=False)
    context_ids = tok.encode(context, add_special_tokens=add_special_tokens)
    if pairwise:
        if len(context_ids) > 1 and context_ids[-1] == tok.eos_token_id:
            context_ids = context_ids[:-1]
        return context_ids, tok.encode(continuation, add_special_tokens=False)
    whole = tok.encode(context + continuation, add_special_tokens=add_special_tokens)
    split = max(0, min(len(context_ids), len(whole) - 1))
    return whole[:split], whole[split:]


@dataclass(frozen=True)
class Window:
    """One model input and the tokens it scores: logits at `input[start + k]` predict `targets[k]`."""

    input_ids: tuple[int, ...]
    start: int
    targets: tuple[int, ...]


def score_window(context: list[int], continuation: list[int], max_length: int) -> tuple[Window, int]:
    """The input that scores `continuation` after `context`, cut from the left to `max_length`.

    Returns the window and how many tokens were cut. If the continuation itself is longer than
    `max_length`, only its last `max_length` tokens are scored (the rest are counted as cut).
    """
    full = context + continuation
    inputs = full[:-1]
    cut = max(0, len(inputs) - max_length)
    inputs = inputs[cut:]
    n_targets = min(len(continuation), len(inputs))
    targets = continuation[len(continuation) - n_targets :]
    return Window(tuple(inputs), len(inputs) - n_targets, tuple(targets)), cut


def rolling_windows(tokens: list[int], prefix: int, max_length: int, stride: int) -> list[Window]:
    """Windows that score every token of `tokens` exactly once, each seeing up to `max_length` of
    context: the first window scores the first `max_length` tokens after the prefix token; each
    next window is the `max_length` tokens before its last target and scores `stride` new ones."""
    full = [prefix, *tokens]
    windows = []
    begin, end = 1, min(len(full), 1 + max_length)
    while begin < end:
        low = max(0, end - 1 - max_length)
        windows.append(Window(tuple(full[low : end - 1]), begin - 1 - low, tuple(full[begin:end])))
        begin, end = end, min(len(full), end + stride)
    return windows
