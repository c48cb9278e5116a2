"""Whether pre-tokenized held-out data (a Nanoset) was tokenized with the model's tokenizer.

Its token ids can all fit the model's vocabulary and still be another tokenizer's: the loss would
then be measured on token sequences the model never sees, a plausible-looking wrong number. The
check decodes a sample of the windows with the model's tokenizer and encodes that text again. The
tokenizer that wrote the ids gives them back (its encoding of a text is the one it produced; only a
window's edges and document boundaries can differ); another tokenizer's ids decode to a run of this
tokenizer's tokens that encoding merges differently. Measured on English text (docs/held_out.md):
1.00 with the right tokenizer, 0.69-0.90 between the GPT-NeoX, SmolLM2 and the tests' tokenizers.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

import numpy as np

from lighteval_nanotron.heldout.windows import whole_documents

AGREEMENT_FLOOR = 0.95
"""Least share of a Nanoset's tokens that re-encoding its decoded text must reproduce."""
SAMPLE_TOKENS = 4096
"""Tokens compared: the first windows of the fixed subset, up to this many targets."""


def _backend(tokenizer: Any) -> tuple[Any, Any]:
    """(the tokenizer under an adapter, its `tokenizers` backend or None): batch calls where there is one."""
    inner = getattr(tokenizer, "tokenizer", tokenizer)
    return inner, getattr(inner, "backend_tokenizer", None) or getattr(inner, "backend", None)


def decode_batch(tokenizer: Any, rows: list[list[int]]) -> list[str]:
    """The text of each row of token ids, special tokens skipped."""
    inner, backend = _backend(tokenizer)
    if backend is not None and hasattr(backend, "decode_batch"):
        return list(backend.decode_batch(rows, skip_special_tokens=True))
    return [inner.decode(row, skip_special_tokens=True) for row in rows]


def _encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    inner, backend = _backend(tokenizer)
    if backend is not None and hasattr(backend, "encode_batch"):
        with whole_documents(backend):
            return [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]
    return [list(inner.encode(text, add_special_tokens=False)) for text in texts]


def unknown_ids(tokenizer: Any, ids: np.ndarray) -> list[int]:
    """The distinct ids of `ids` that the tokenizer has no token for (sorted). A model's vocabulary
    is often padded beyond its tokenizer's ids; such an id decodes to nothing, so the re-encoding
    check cannot see it, while the model scores it with an embedding row no text trained."""
    inner, backend = _backend(tokenizer)
    to_token = backend.id_to_token if backend is not None else inner.convert_ids_to_tokens

    def known(token: int) -> bool:
        try:
            return to_token(token) is not None
        except (IndexError, KeyError, ValueError):  # a slow tokenizer's lookup past its table
            return False

    return [int(token) for token in np.unique(ids) if not known(int(token))]


def reencoding_agreement(tokenizer: Any, windows: np.ndarray) -> float:
    """Share of the targets of the first windows (up to SAMPLE_TOKENS) that encoding their decoded
    text reproduces, in order (difflib's matching ratio); tokens that decode to nothing (special
    tokens) are left out of the comparison, as decoding leaves them out of the text."""
    rows, total = [], 0
    for window in windows:
        rows.append([int(token) for token in window[1:]])
        total += len(rows[-1])
        if total >= SAMPLE_TOKENS:
            break
    distinct = sorted({token for row in rows for token in row})
    silent = {token for token, text in zip(distinct, decode_batch(tokenizer, [[t] for t in distinct])) if not text}
    originals = [[token for token in row if token not in silent] for row in rows]
    again = _encode_batch(tokenizer, decode_batch(tokenizer, rows))
    matched = sum(
        sum(block.size for block in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
        for a, b in zip(originals, again)
    )
    compared = sum(len(a) + len(b) for a, b in zip(originals, again))
    return 2.0 * matched / compared if compared else 1.0
