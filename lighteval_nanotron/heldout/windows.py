"""Token streams cut into windows, the bytes each token stands for, and the fixed subset.

Text sources are tokenized as the training's text loaders do (`training.data.token_chunks`,
Nanotron's `clm_process`): each document with the tokenizer's special tokens, then the
end-of-text token, all concatenated; windows of `sequence_length + 1` tokens start every
`sequence_length` tokens (consecutive windows share one token), so every token of the stream but
the first is a target exactly once.

Bytes of a text token: the UTF-8 bytes of the document's text from the end of the previous token's
span to the end of its own (the tokenizer's character offsets), the text after the last span
going to the last token; special tokens (BOS, the end-of-text token) stand for 0 bytes. The bytes
of a document's tokens add up to `len(text.encode("utf-8"))`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from lighteval_nanotron.errors import ConfigError


def backend_tokenizer(tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` under a transformers fast tokenizer, the engine's adapter or the
    project's `FastTokenizer` (text sources need its character offsets)."""
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None and not hasattr(tokenizer, "encode_batch"):  # the engine's TokenizerAdapter
        tokenizer = inner
    for attribute in ("backend_tokenizer", "backend", "_tokenizer"):
        backend = getattr(tokenizer, attribute, None)
        if backend is not None and hasattr(backend, "encode_batch"):
            return backend
    if hasattr(tokenizer, "encode_batch") and hasattr(tokenizer, "token_to_id"):
        return tokenizer
    raise ConfigError(
        f"Held-out text needs a fast tokenizer (a `tokenizers` tokenizer.json) for its byte offsets; "
        f"{type(tokenizer).__name__} is not one: save the tokenizer with tokenizer.json, or use a Nanoset folder."
    )


@contextlib.contextmanager
def whole_documents(backend: Any) -> Iterator[Any]:
    """`backend` (a `tokenizers.Tokenizer`) with truncation and padding off inside the block, as they
    were after it. A `tokenizer.json` may set either, and transformers keeps them on its backend,
    switching them off per call of the tokenizer; held-out text is encoded by the backend itself
    (for its offsets), where a truncated document would lose the tokens of its tail but not their
    bytes, and padding would add tokens to the stream."""
    truncation, padding = backend.truncation, backend.padding
    backend.no_truncation()
    backend.no_padding()
    try:
        yield backend
    finally:
        if truncation is not None:
            backend.enable_truncation(**truncation)
        if padding is not None:
            backend.enable_padding(**padding)


def end_of_text_id(tokenizer: Any) -> int | None:
    """The token appended after each document (the tokenizer's EOS), as the training loaders do."""
    for source in (tokenizer, getattr(tokenizer, "tokenizer", None)):
        token_id = getattr(source, "eos_token_id", None)
        if token_id is not None:
            return int(token_id)
    return None


def _char_byte_ends(text: str) -> np.ndarray:
    """`[len(text) + 1]`: UTF-8 bytes of `text[:i]` for every i."""
    if text.isascii():
        return np.arange(len(text) + 1, dtype=np.int64)
    points = np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)
    sizes = 1 + (points >= 0x80).astype(np.int64) + (points >= 0x800) + (points >= 0x10000)
    return np.concatenate([[0], np.cumsum(sizes)])


def token_bytes(text: str, offsets: list[tuple[int, int]], special: list[int]) -> np.ndarray:
    """Bytes each token of one document stands for (see the module docstring)."""
    counts = np.zeros(len(offsets), dtype=np.int64)
    if not offsets:
        return counts
    byte_ends = _char_byte_ends(text)
    normal = np.asarray(special, dtype=bool) == 0
    ends = np.array([end for _, end in offsets], dtype=np.int64).clip(0, len(text))
    reached = np.where(normal, byte_ends[ends], 0)
    reached = np.maximum.accumulate(reached)
    counts = np.diff(np.concatenate([[0], reached]))
    counts[~normal] = 0
    if normal.any():
        counts[np.flatnonzero(normal)[-1]] += int(byte_ends[-1]) - int(reached[-1])
    return counts


BATCH_DOCUMENTS = 256
BATCH_CHARACTERS = 1_000_000
"""Most characters encoded in one batch (at least one document): a batch's encodings are all held at
once (about 100 bytes a token), and 256 books would take gigabytes for a budget one of them fills."""


def text_stream(texts: Iterable[str], tokenizer: Any, needed_tokens: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """`(ids int32, bytes per token int64, documents used)` of `texts`, each followed by the end-of-text
    token, stopping once at least `needed_tokens` tokens are there (None: every text)."""
    backend = backend_tokenizer(tokenizer)
    eos = end_of_text_id(tokenizer)
    ids: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    total = documents = 0
    for batch in _batches(texts):
        with whole_documents(backend):
            encodings = backend.encode_batch(batch, add_special_tokens=True)
        for text, encoding in zip(batch, encodings):
            doc_ids = list(encoding.ids) + ([eos] if eos is not None else [])
            doc_bytes = token_bytes(text, encoding.offsets, encoding.special_tokens_mask)
            if eos is not None:
                doc_bytes = np.append(doc_bytes, 0)
            ids.append(np.asarray(doc_ids, dtype=np.int64))
            sizes.append(doc_bytes)
            total += len(doc_ids)
            documents += 1
            if needed_tokens is not None and total >= needed_tokens:
                break
        if needed_tokens is not None and total >= needed_tokens:
            break
    if not ids:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), 0
    stream = np.concatenate(ids)
    if stream.size and int(stream.max()) > np.iinfo(np.int32).max:
        raise ConfigError("A token id does not fit in 32 bits: the tokenizer is not one a model can use.")
    return stream.astype(np.int32), np.concatenate(sizes), documents


def _batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """`texts` in batches of up to BATCH_DOCUMENTS documents and BATCH_CHARACTERS characters (or one document)."""
    batch: list[str] = []
    characters = 0
    for text in texts:
        batch.append(text)
        characters += len(text)
        if len(batch) == BATCH_DOCUMENTS or characters >= BATCH_CHARACTERS:
            yield batch
            batch, characters = [], 0
    if batch:
        yield batch


def stream_windows(ids: np.ndarray, sequence_length: int) -> int:
    """Windows of `sequence_length + 1` tokens, one every `sequence_length` tokens, in `ids`."""
    return max(0, (len(ids) - 1) // sequence_length)


def cut_windows(ids: np.ndarray, sizes: np.ndarray, sequence_length: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The first `count` windows of the stream and the bytes of each window's targets."""
    starts = np.arange(count, dtype=np.int64) * sequence_length
    offsets = np.arange(sequence_length + 1, dtype=np.int64)
    windows = ids[starts[:, None] + offsets[None, :]]
    target_sizes = np.concatenate([[0], np.cumsum(sizes)])
    target_bytes = target_sizes[starts + sequence_length + 1] - target_sizes[starts + 1]
    return windows.astype(np.int32), target_bytes.astype(np.int64)


def fixed_subset(available: int, wanted: int, seed: int) -> np.ndarray:
    """Sorted indices of `wanted` of `available` items, the same on every call (all of them when
    `wanted >= available`): a seeded permutation's first `wanted`."""
    if wanted >= available:
        return np.arange(available, dtype=np.int64)
    chosen = np.random.default_rng(seed).permutation(available)[:wanted]
    return np.sort(chosen)
