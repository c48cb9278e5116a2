"""One held-out domain from its spec: read, tokenized (text) or taken as is (Nanoset), windowed,
its fixed subset chosen, and checked, once at setup. Every problem raises `ConfigError` (or
`DatasetLoadError`) naming the domain and the fix; a budget larger than the data is a note."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.heldout.nanoset import HIGH_HALF_LIMIT, is_nanoset_folder, open_nanoset
from lighteval_nanotron.heldout.spec import HeldOutSpec
from lighteval_nanotron.heldout.text_source import load_text_dataset, texts_in_order
from lighteval_nanotron.heldout.tokenizer_match import AGREEMENT_FLOOR, decode_batch, reencoding_agreement, unknown_ids
from lighteval_nanotron.heldout.windows import cut_windows, fixed_subset, stream_windows, text_stream
from lighteval_nanotron.requests.held_out import WINDOWS_DIGEST, HeldOutSet

logger = logging.getLogger(__name__)


def build_held_out_set(
    spec: HeldOutSpec, tokenizer: Any, sequence_length: int, vocab_size: int, max_positions: int
) -> HeldOutSet:
    """The windows of `spec` at `sequence_length`, checked against the model (`vocab_size` token
    ids, `max_positions` positions)."""
    where = f"held-out domain {spec.name!r}"
    check_sequence_length(spec.name, sequence_length, max_positions)
    wanted = max(1, spec.tokens // sequence_length)
    path = Path(spec.path).expanduser()
    if is_nanoset_folder(path):
        held_out = _nanoset_set(spec, path, tokenizer, sequence_length, wanted)
    else:
        held_out = _text_set(spec, tokenizer, sequence_length, wanted)
    _check_vocabulary(held_out, vocab_size, where)
    if held_out.description["kind"] == "nanoset":
        _check_tokenizer(held_out, tokenizer, where)
    description = held_out.description
    description.update(sequence_length=sequence_length, sequences=int(held_out.windows.shape[0]))
    description.update(target_tokens=held_out.target_tokens, target_bytes=int(held_out.target_bytes.sum()))
    description.update(token_budget=spec.tokens, seed=spec.seed)
    description[WINDOWS_DIGEST] = held_out.digest()
    for note in description.get("notes", []):
        logger.warning("%s: %s", where, note)
    return held_out


def check_sequence_length(name: str, sequence_length: int, max_positions: int) -> None:
    """A `ConfigError` naming the domain when its windows do not fit the model's positions."""
    where = f"held-out domain {name!r}"
    if sequence_length < 1:
        raise ConfigError(f"{where}: sequence length {sequence_length}: use a positive number of tokens.")
    if sequence_length > max_positions:
        raise ConfigError(
            f"{where}: sequence length {sequence_length} is beyond the model's {max_positions} positions: "
            f"lower the held-out sequence length to at most {max_positions}."
        )


def _budget_note(spec: HeldOutSpec, available_windows: int, sequence_length: int) -> list[str]:
    if spec.tokens <= available_windows * sequence_length:
        return []
    return [
        f"budget of {spec.tokens} tokens is larger than the data: all {available_windows * sequence_length} "
        f"target tokens ({available_windows} windows of {sequence_length}) are scored"
    ]


def _check_tokenizer(held_out: HeldOutSet, tokenizer: Any, where: str) -> None:
    """Pre-tokenized ids must be the model's tokenizer's (`heldout.tokenizer_match`): each one a token of
    it, and their text encoded again giving them back."""
    unknown = unknown_ids(tokenizer, held_out.windows)
    if unknown:
        raise ConfigError(
            f"{where}: token id {unknown[0]} in {held_out.description['source']} ({len(unknown)} distinct ids in all)"
            " is not a token of the model's tokenizer, though it fits the model's (padded) vocabulary: the data was "
            "tokenized with another tokenizer (re-tokenize it with the model's)."
        )
    agreement = reencoding_agreement(tokenizer, held_out.windows)
    held_out.description["tokenizer_agreement"] = round(agreement, 4)
    if agreement < AGREEMENT_FLOOR:
        named = held_out.description.get("tokenizer_name")
        named = f" (its metadata names {named!r})" if named else ""
        raise ConfigError(
            f"{where}: {held_out.description['source']} was not tokenized with the model's tokenizer{named}: "
            f"decoding its tokens and encoding the text again gives back {agreement:.0%} of them (the tokenizer "
            f"that wrote them gives back nearly all; under {AGREEMENT_FLOOR:.0%} they are another tokenizer's). "
            "Tokenize the data with the model's tokenizer, or give its text (a jsonl/parquet file) instead."
        )


def _nanoset_set(spec: HeldOutSpec, path: Path, tokenizer: Any, sequence_length: int, wanted: int) -> HeldOutSet:
    try:
        folder = open_nanoset(path)
    except ConfigError as error:
        raise ConfigError(f"held-out domain {spec.name!r}: {error}") from None
    available = sum(folder.windows_per_file(sequence_length))
    if available == 0:
        raise ConfigError(
            f"held-out domain {spec.name!r}: {path} holds {sum(folder.tokens_per_file)} tokens, fewer than one "
            f"window of {sequence_length + 1} in any file: lower the sequence length or add data."
        )
    chosen = fixed_subset(available, wanted, spec.seed)
    windows = folder.read_windows(chosen, sequence_length)
    texts = decode_batch(tokenizer, [row[1:].tolist() for row in windows])
    target_bytes = np.array([len(text.encode("utf-8")) for text in texts], dtype=np.int64)
    description = {
        "source": str(path),
        "kind": "nanoset",
        "token_size": folder.token_size,
        "files": len(folder.files),
        "tokenizer_name": folder.tokenizer_name,
        "available_tokens": int(available * sequence_length),
        "bytes": "UTF-8 bytes of each window's targets decoded with the tokenizer (special tokens skipped)",
        "notes": _budget_note(spec, available, sequence_length),
    }
    return HeldOutSet(spec.name, windows, target_bytes, description)


def _text_set(spec: HeldOutSpec, tokenizer: Any, sequence_length: int, wanted: int) -> HeldOutSet:
    dataset = load_text_dataset(spec)
    column = spec.text_column
    rows = len(dataset)
    needed = wanted * sequence_length + 1
    ids, sizes, documents = text_stream(texts_in_order(dataset, column, range(rows), spec), tokenizer, needed)
    all_documents = documents == rows
    if not all_documents:  # more data than the budget: a seeded subset of documents, in seeded order
        order = np.random.default_rng(spec.seed).permutation(rows)
        ids, sizes, documents = text_stream(texts_in_order(dataset, column, order, spec), tokenizer, needed)
    available = stream_windows(ids, sequence_length)
    if available == 0:
        raise ConfigError(
            f"held-out domain {spec.name!r}: {spec.path} gives {len(ids)} tokens, fewer than one window of "
            f"{sequence_length + 1}: lower the sequence length or add text."
        )
    count = min(available, wanted)
    windows, target_bytes = cut_windows(ids, sizes, sequence_length, count)
    description = {
        "source": spec.path,
        "kind": "text",
        "text_column": column,
        "rows": rows,
        "documents": documents,
        "selection": "every document, in order" if all_documents else f"documents in a permutation seeded {spec.seed}",
        "available_tokens": int(available * sequence_length) if all_documents else None,
        "bytes": "UTF-8 bytes of the original text (each token: its offsets' span; special tokens 0)",
        "notes": _budget_note(spec, available, sequence_length) if all_documents else [],
    }
    return HeldOutSet(spec.name, windows, target_bytes, description)


def _check_vocabulary(held_out: HeldOutSet, vocab_size: int, where: str) -> None:
    if held_out.windows.size == 0:
        return
    highest = int(held_out.windows.max())
    lowest = int(held_out.windows.min())
    if highest >= vocab_size or lowest < 0:
        wider = held_out.description.get("token_size") == 4 and highest >= HIGH_HALF_LIMIT << 16
        raise ConfigError(
            f"{where}: token id {highest if highest >= vocab_size else lowest} in {held_out.description.get('source')} "
            f"does not fit the model's vocabulary of {vocab_size}: the data was tokenized with another tokenizer "
            "(re-tokenize it with the model's)"
            + (
                ", or its 2-byte tokens were read as 4 bytes (check the token size its .metadata names)."
                if wider
                else "."
            )
        )
