"""A tokenizer folder read by the `tokenizers` library alone, when transformers would give the same ids.

Importing transformers costs an `eval` process about 0.7 s of CPU before the first prompt,
while the tokenizer the engine needs is `tokenizer.json` itself. transformers'
`TokenizersBackend` (what `AutoTokenizer` loads for a generic `tokenizer_class`) changes a
`tokenizer.json` only in ways this module can see in the folder: a model-specific class
rebuilds the tokenizer, `add_bos_token` / `add_eos_token` can replace its post-processor, special
tokens named in `tokenizer_config.json` are (re)added as special, `clean_up_tokenization_spaces`
edits decoded text, a `config.json` can pick another class, truncation and padding settings
are switched off per call. `FastTokenizer.from_folder` raises `TransformersNeeded` naming the first
such thing found; only a folder with none is read here, every other one by transformers. Chat
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


class TransformersNeeded(Exception):
    """What in a tokenizer folder transformers would apply on top of its `tokenizer.json`."""


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        with open(folder / "tokenizer_config.json", encoding="utf-8-sig") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as error:
        raise TransformersNeeded(f"unreadable tokenizer_config.json ({error})") from error
    if not isinstance(config, dict):
        raise TransformersNeeded("tokenizer_config.json is not a JSON object")
    return config


def _check_config(config: dict[str, Any]) -> None:
    if config.get("tokenizer_class") not in GENERIC_CLASSES:
        raise TransformersNeeded(
            f"tokenizer_class {config.get('tokenizer_class')!r} is not one of {', '.join(GENERIC_CLASSES)}"
        )
    unknown = sorted(set(config) - NEUTRAL_KEYS)
    if unknown:
        raise TransformersNeeded(f"tokenizer_config.json sets {', '.join(unknown)}")
    if config.get("backend", "tokenizers") != "tokenizers":
        raise TransformersNeeded(f"backend {config['backend']!r}")
    if config.get("clean_up_tokenization_spaces"):
        raise TransformersNeeded("clean_up_tokenization_spaces edits decoded text")


def _special_tokens(config: dict[str, Any]) -> list[Any]:
    tokens = [config.get(key) for key in SPECIAL_TOKEN_KEYS]
    for key in SPECIAL_TOKEN_LISTS:
        value = config.get(key) or []
        tokens += list(value.values()) if isinstance(value, dict) else list(value)
    return [token for token in tokens if token is not None]


def _differs(token: Any, flags: dict[str, Any]) -> bool:
    return any(getattr(token, key, None) != value for key, value in flags.items())


def _check_backend(config: dict[str, Any], backend: Any) -> None:
    if backend.truncation is not None or backend.padding is not None:
        raise TransformersNeeded("tokenizer.json sets truncation or padding")
    if backend.post_processor is None:
        raise TransformersNeeded("tokenizer.json has no post-processor (transformers writes one)")
    by_id = backend.get_added_tokens_decoder()
    by_content = {token.content: token for token in by_id.values()}
    for token in _special_tokens(config):
        if not isinstance(token, str):
            raise TransformersNeeded(f"special token {token!r} is not a plain string")
        if token not in by_content or _differs(by_content[token], PLAIN_SPECIAL_TOKEN):
            raise TransformersNeeded(f"special token {token!r} is not an added special token of tokenizer.json")
    for token_id, listed in (config.get("added_tokens_decoder") or {}).items():
        flags = {key: value for key, value in listed.items() if key != "__type"}
        if int(token_id) not in by_id or _differs(by_id[int(token_id)], flags):
            raise TransformersNeeded(f"added_tokens_decoder entry {token_id} differs from tokenizer.json")


def plain_tokenizer_obstacle(folder: str | Path) -> str | None:
    """Why `folder` needs transformers to tokenize as transformers does, or None when its
    `tokenizer.json` read by `tokenizers` alone gives the same ids and decoded text."""
    try:
        FastTokenizer.from_folder(folder)
    except TransformersNeeded as reason:
        return str(reason)
    return None


class FastTokenizer:
    """The part of a transformers tokenizer's interface that the engine uses (ids of texts, alone
    or in a batch, decoded text, BOS / EOS), over a `tokenizers.Tokenizer`. Built by
    `FastTokenizer.from_folder`."""

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
        """Raises `TransformersNeeded` (saying what) for a folder that transformers would read otherwise."""
        from tokenizers import Tokenizer

        folder = Path(folder)
        if not (folder / "tokenizer.json").is_file() or not (folder / "tokenizer_config.json").is_file():
            raise TransformersNeeded("not a folder with tokenizer.json and tokenizer_config.json")
        present = [name for name in TRANSFORMERS_FILES if (folder / name).exists()]
        if present:
            raise TransformersNeeded(f"it holds {', '.join(present)}")
        config = _read_config(folder)
        _check_config(config)
        try:
            backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as error:  # the library raises plain Exceptions for a bad file
            raise TransformersNeeded(f"tokenizers cannot read tokenizer.json ({error})") from error
        _check_backend(config, backend)
        return cls(backend, {key: config.get(key) for key in SPECIAL_TOKEN_KEYS}, str(folder))

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

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary, added tokens left out (as transformers counts it)."""
        return self.backend.get_vocab_size(with_added_tokens=False)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=with_added_tokens)

    def __len__(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)
