"""Reading a Nanoset folder: the tokenized files Nanotron's data stages read.

Format (written by datatrove's `DocumentTokenizer`, read by current Nanotron's `Nanoset` /
`TokenizedBytes` datasets through datatrove's `DatatroveFolderDataset`): a folder of `*.ds` files,
each a flat array of little-endian token ids of `token_size` bytes (2: uint16, 4: uint32), with
`<file>.ds.index` (uint64 document ends) and `<file>.ds.metadata` beside it. The metadata's first
line is `tokenizer_name|token_size` (older datatrove: the tokenizer name alone, uint16 tokens).
Training samples are the consecutive, non-overlapping chunks of `sequence_length + 1` tokens of
each file (a file's last partial chunk is never read); the files are taken in name order here.

Nanotron 0.4 (the PyPI release) predates Nanosets; the folder is read here with numpy alone, so
held-out Nanosets work under either Nanotron.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lighteval_nanotron.errors import ConfigError

TOKEN_FILE_SUFFIX = ".ds"
_DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


def is_nanoset_folder(path: Path) -> bool:
    return path.is_dir() and any(path.glob("*" + TOKEN_FILE_SUFFIX))


@dataclass
class NanosetFolder:
    """The token files of one Nanoset folder (name order) and their token size."""

    folder: Path
    files: list[Path]
    token_size: int
    tokens_per_file: list[int]
    tokenizer_name: str | None

    def windows_per_file(self, sequence_length: int) -> list[int]:
        return [tokens // (sequence_length + 1) for tokens in self.tokens_per_file]

    def read_windows(self, indices: np.ndarray, sequence_length: int) -> np.ndarray:
        """`[len(indices), sequence_length + 1]` int32: the chunks with these global indices
        (files in name order, each file's chunks in order)."""
        width = sequence_length + 1
        firsts = np.cumsum([0] + self.windows_per_file(sequence_length))
        out = np.empty((len(indices), width), dtype=np.int32)
        for position, file_index in enumerate(np.searchsorted(firsts, indices, side="right") - 1):
            local = int(indices[position] - firsts[file_index])
            tokens = np.memmap(self.files[file_index], dtype=_DTYPES[self.token_size], mode="r")
            out[position] = tokens[local * width : (local + 1) * width]
            del tokens
        return out


FIRST_TOKENS_CHECKED = 4096
"""Tokens of each file read at setup: the file is readable, and 4-byte tokens are told from 2-byte ones."""
HIGH_HALF_LIMIT = 4
"""4-byte ids below 4 x 65536 (every vocabulary in use) read as 2-byte tokens put a value under this
limit at every other position; a 2-byte file of text does not."""


def _unreadable(path: Path, error: Exception) -> ConfigError:
    return ConfigError(
        f"{path} cannot be read ({type(error).__name__}: {error}): fix its permissions, or restore or remove it."
    )


def _check_tokens(file: Path, token_size: int) -> None:
    """The file's first tokens can be read; read as 2-byte tokens, they are not 4-byte ones: every
    other one below HIGH_HALF_LIMIT (the high halves of little-endian uint32 ids) would put a 0 or 1
    token after each id, which the tokenizer check cannot see (the ids stay its own, "!" between words)."""
    try:
        sample = np.fromfile(file, dtype=_DTYPES[token_size], count=FIRST_TOKENS_CHECKED)
    except OSError as error:
        raise _unreadable(file, error) from None
    if token_size != 2 or len(sample) < 64:
        return
    if int(sample[1::2].max()) < HIGH_HALF_LIMIT and int(sample[0::2].max()) >= HIGH_HALF_LIMIT:
        raise ConfigError(
            f"{file}: read as 2-byte tokens (its .metadata says so, or there is none) it holds 4-byte tokens: every "
            f"other token of its first {len(sample)} is below {HIGH_HALF_LIMIT}, the high half of a uint32 id. "
            f"Put back the {file.name}.metadata datatrove wrote ('tokenizer_name|4' on its first line)."
        )


def _metadata(file: Path) -> tuple[str | None, int | None]:
    """(tokenizer name, token size) from `<file>.metadata`, when there is one."""
    path = file.with_name(file.name + ".metadata")
    if not path.exists():
        return None, None
    try:
        first = path.read_text(encoding="utf-8").splitlines()[:1]
    except (OSError, UnicodeDecodeError) as error:
        raise _unreadable(path, error) from None
    if not first:
        return None, None
    name, sep, size = first[0].partition("|")
    if not sep:
        return name.strip() or None, 2
    try:
        token_size = int(size)
    except ValueError:
        raise ConfigError(f"{path}: first line {first[0]!r} should be 'tokenizer_name|token_size'.") from None
    return name.strip() or None, token_size


def open_nanoset(folder: Path) -> NanosetFolder:
    """The folder's token files, checked: a token size of 2 or 4 bytes and a tokenizer agreed by every
    metadata file (2 bytes where there is none, datatrove's default), every file readable, sizes whole
    tokens, 4-byte tokens not read as 2, at least one token."""
    files = sorted(folder.glob("*" + TOKEN_FILE_SUFFIX))
    if not files:
        raise ConfigError(f"{folder}: no *{TOKEN_FILE_SUFFIX} token files (is it a Nanoset folder?).")
    for file in files:
        if not file.is_file():
            raise ConfigError(f"{file} is not a file (a folder, or a link to nothing): restore it or remove it.")
    found = {_metadata(file) for file in files}
    sizes = {size for _, size in found if size is not None} or {2}
    if len(sizes) > 1:
        raise ConfigError(
            f"{folder}: its .metadata files disagree on the token size ({sorted(sizes)}): one tokenizer per folder."
        )
    token_size = sizes.pop()
    if token_size not in _DTYPES:
        raise ConfigError(f"{folder}: token size {token_size} bytes: Nanosets store 2 (uint16) or 4 (uint32).")
    names = sorted({name for name, _ in found if name})
    if len(names) > 1:
        raise ConfigError(
            f"{folder}: its .metadata files name several tokenizers ({', '.join(names)}): one tokenizer per folder "
            "(the tokenizer check reads only the first windows); keep the files of the model's tokenizer."
        )
    counts = []
    for file in files:
        size = file.stat().st_size
        if size % token_size:
            raise ConfigError(
                f"{file}: {size} bytes is not a whole number of {token_size}-byte tokens "
                "(truncated, or another token size)."
            )
        _check_tokens(file, token_size)
        counts.append(size // token_size)
    if not sum(counts):
        raise ConfigError(f"{folder}: its token files are empty.")
    return NanosetFolder(folder, files, token_size, counts, names[0] if names else None)
