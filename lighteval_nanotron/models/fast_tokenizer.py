"""A tokenizer folder read by the `tokenizers` library alone, when transformers would give the same ids.

Importing transformers costs an `eval` process about 0.7 s of CPU before the first prompt,
while the tokenizer the engine needs is `tokenizer.json` itself. transformers'
`TokenizersBackend` (what `AutoTokenizer` loads for a generic `tokenizer_class`) changes a
`tokenizer.json` only in ways this module can see in the folder: a model-specific class
rebuilds the tokenizer, `add_bos_token` / `add_eos_token` replace its post-processor, special
tokens named in `tokenizer_config.json` are (re)added as special, `clean_up_tokenization_spaces`
edits decoded text, a `config.json` can pick another class, truncation and padding settings
are switched off per call. `plain_tokenizer_obstacle(folder)` names the first such thing found;
only a folder with none is read here (`FastTokenizer`), every other one by transformers. Chat
templates always go through transformers (`load_tokenizer(..., chat_template=True)`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")
"""`tokenizer_class` values for which transformers keeps `tokenizer.json` as it is."""
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
SPECIAL_TOKEN_LISTS = ("extra_special_tokens", "additional_special_tokens")
NEUTRAL_KEYS = frozenset(
    {"backend", "tokenizer_class", "model_max_length", "padding_side", "truncation_side", "model_input_names",
     "chat_template", "clean_up_tokenization_spaces", "added_tokens_decoder", *SPECIAL_TOKEN_KEYS,
     *SPECIAL_TOKEN_LISTS}
)  # fmt: skip
"""`tokenizer_config.json` keys that change no id and no decoded text here (values checked below)."""
TRANSFORMERS_FILES = (
    "config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer.model", "vocab.json", "merges.txt",
    "tekken.json",
)  # fmt: skip
"""Files next to `tokenizer.json` that transformers would also read."""
PLAIN_SPECIAL_TOKEN = {"special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}
"""How transformers adds a named special token: one already in `tokenizer.json` like this is left as it is."""


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _config_obstacle(config: dict[str, Any]) -> str | None:
    if config.get("tokenizer_class") not in GENERIC_CLASSES:
        return f"tokenizer_class {config.get('tokenizer_class')!r} is not one of {', '.join(GENERIC_CLASSES)}"
    unknown = sorted(set(config) - NEUTRAL_KEYS)
    if unknown:
        return f"tokenizer_config.json sets {', '.join(unknown)}"
    if config.get("backend", "tokenizers") != "tokenizers":
        return f"backend {config['backend']!r}"
    if config.get("clean_up_tokenization_spaces"):
        return "clean_up_tokenization_spaces edits decoded text"
    return None


def _special_tokens(config: dict[str, Any]) -> list[Any]:
    tokens = [config.get(key) for key in SPECIAL_TOKEN_KEYS]
    for key in SPECIAL_TOKEN_LISTS:
        value = config.get(key) or []
        tokens += list(value.values()) if isinstance(value, dict) else list(value)
    return [token for token in tokens if token is not None]


def _tokenizer_json_obstacle(config: dict[str, Any], tokenizer_json: dict[str, Any]) -> str | None:
    if tokenizer_json.get("truncation") is not None or tokenizer_json.get("padding") is not None:
        return "tokenizer.json sets truncation or padding"
    if tokenizer_json.get("post_processor") is None:
        return "tokenizer.json has no post-processor (transformers writes one)"
    added = {entry["content"]: entry for entry in tokenizer_json.get("added_tokens", [])}
    for token in _special_tokens(config):
        if not isinstance(token, str):
            return f"special token {token!r} is not a plain string"
        entry = added.get(token)
        if entry is None or any(entry.get(key) != value for key, value in PLAIN_SPECIAL_TOKEN.items()):
            return f"special token {token!r} is not an added special token of tokenizer.json"
    by_id = {entry["id"]: entry for entry in tokenizer_json.get("added_tokens", [])}
    for token_id, listed in (config.get("added_tokens_decoder") or {}).items():
        entry = by_id.get(int(token_id))
        if entry is None or any(entry.get(key) != value for key, value in listed.items() if key != "__type"):
            return f"added_tokens_decoder entry {token_id} differs from tokenizer.json"
    return None


def plain_tokenizer_obstacle(folder: str | Path) -> str | None:
    """Why `folder` needs transformers to tokenize as transformers does, or None when its
    `tokenizer.json` read by `tokenizers` alone gives the same ids and decoded text."""
    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file() or not (folder / "tokenizer_config.json").is_file():
        return "not a folder with tokenizer.json and tokenizer_config.json"
    present = [name for name in TRANSFORMERS_FILES if (folder / name).exists()]
    if present:
        return f"it holds {', '.join(present)}"
    try:
        config = _read_json(folder / "tokenizer_config.json")
        tokenizer_json = _read_json(folder / "tokenizer.json")
    except (OSError, ValueError) as error:
        return f"unreadable tokenizer files ({error})"
    if not isinstance(config, dict) or not isinstance(tokenizer_json, dict):
        return "tokenizer files are not JSON objects"
    return _config_obstacle(config) or _tokenizer_json_obstacle(config, tokenizer_json)


class FastTokenizer:
    """The part of a transformers tokenizer's interface that the engine uses (ids of texts, alone
    or in a batch, decoded text, BOS / EOS), over a `tokenizers.Tokenizer`. Built by
    `FastTokenizer.from_folder` for a folder that `plain_tokenizer_obstacle` passes."""

    is_fast = True
    chat_template = None
    """None: a chat template is rendered by a transformers tokenizer (loaded instead)."""

    def __init__(self, backend: Any, special_tokens: dict[str, str | None], name_or_path: str) -> None:
        self.backend = backend
        self.name_or_path = name_or_path
        self.bos_token = special_tokens.get("bos_token")
        self.eos_token = special_tokens.get("eos_token")
        self.pad_token = special_tokens.get("pad_token")
        self.bos_token_id = self.convert_tokens_to_ids(self.bos_token)
        self.eos_token_id = self.convert_tokens_to_ids(self.eos_token)
        self.pad_token_id = self.convert_tokens_to_ids(self.pad_token)

    @classmethod
    def from_folder(cls, folder: str | Path) -> FastTokenizer:
        from tokenizers import Tokenizer

        config = _read_json(Path(folder) / "tokenizer_config.json")
        special = {key: config.get(key) for key in SPECIAL_TOKEN_KEYS}
        return cls(Tokenizer.from_file(str(Path(folder) / "tokenizer.json")), special, str(folder))

    def convert_tokens_to_ids(self, token: str | None) -> int | None:
        return None if token is None else self.backend.token_to_id(token)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(
        self, texts: list[str], add_special_tokens: bool = True, return_attention_mask: bool = False
    ) -> dict[str, list[list[int]]]:
        """The ids of each text (one batch call, on the library's threads), as `{"input_ids": ...}`."""
        encodings = self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)
        out = {"input_ids": [encoding.ids for encoding in encodings]}
        if return_attention_mask:
            out["attention_mask"] = [encoding.attention_mask for encoding in encodings]
        return out

    def decode(self, token_ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(token_ids), skip_special_tokens=skip_special_tokens)

    def __len__(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)
