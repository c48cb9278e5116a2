"""`HeldOutSpec`: one named held-out domain as the user wrote it (hook section or `eval --held-out`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from lighteval_nanotron.errors import ConfigError

DEFAULT_HELD_OUT_TOKENS = 1_000_000
"""Target tokens per domain when no budget is given."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


@dataclass(frozen=True)
class HeldOutSpec:
    """A held-out domain: its name and source, and how much of it to score."""

    name: str
    """Results key `heldout|<name>`: letters, digits and `_ . : -`, not starting with `_`."""

    path: str
    """A Nanoset folder (`*.ds` token files), a jsonl/parquet file or a folder of them with a text
    column, or a Hugging Face dataset name (loaded with `datasets.load_dataset`)."""

    tokens: int = DEFAULT_HELD_OUT_TOKENS
    """Target tokens to score at each evaluation (whole windows: `tokens // sequence_length`,
    at least one). A budget larger than the data scores all of it, with a note."""

    text_column: str = "text"
    """Column holding the text (text sources)."""

    split: str = "train"
    """Split of a Hugging Face dataset (and of local files, which `datasets` calls `train`)."""

    subset: str | None = None
    """Configuration name of a Hugging Face dataset."""

    seed: int = 0
    """Seed of the fixed subset when the data holds more than the budget."""

    def __post_init__(self) -> None:
        where = f"held-out domain {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigError(
                f"{where}: a name is letters, digits and '_.:-', not starting with '_' or '.' "
                "(it becomes the results key heldout|<name>); rename it."
            )
        if not isinstance(self.path, str) or not self.path.strip():
            raise ConfigError(
                f"{where} has no path: give a Nanoset folder, a jsonl/parquet file or folder, or a dataset name."
            )
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 1:
            raise ConfigError(f"{where}: tokens is {self.tokens!r}: set a positive number of tokens to score.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"{where}: seed is {self.seed!r}: use an integer >= 0.")
        for key in ("text_column", "split", "subset"):
            value = getattr(self, key)
            if not (isinstance(value, str) and value.strip()) and not (key == "subset" and value is None):
                raise ConfigError(f"{where}: {key} is {value!r}: give a name (a string).")

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def parse_held_out_option(value: str, tokens: int = DEFAULT_HELD_OUT_TOKENS) -> HeldOutSpec:
    """`NAME=PATH` (the `eval --held-out` form) -> a spec with `tokens` as its budget."""
    name, sep, path = value.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise ConfigError(f"{value!r} is not a domain: write NAME=PATH, e.g. web=/data/web_val.jsonl.")
    return HeldOutSpec(name=name.strip(), path=path.strip(), tokens=tokens)


def held_out_specs(
    entries: Mapping[str, Any] | Sequence[str] | None, tokens: int = DEFAULT_HELD_OUT_TOKENS
) -> list[HeldOutSpec]:
    """Specs from the hook's `held_out:` mapping (`{name: path}` or `{name: {path: ..., tokens: ...}}`)
    or from `NAME=PATH` strings; `tokens` is the budget of those that give none. Names must be unique."""
    if not entries:
        return []
    specs: list[HeldOutSpec] = []
    if isinstance(entries, Mapping):
        for name, entry in entries.items():
            if isinstance(entry, str):
                specs.append(HeldOutSpec(name=str(name), path=entry, tokens=tokens))
            elif isinstance(entry, Mapping):
                unknown = sorted(set(entry) - set(HeldOutSpec.names()) - {"name"})
                if unknown:
                    raise ConfigError(
                        f"held-out domain {name!r}: unknown key(s) {unknown}; known: {HeldOutSpec.names()[1:]}."
                    )
                specs.append(HeldOutSpec(**{"tokens": tokens, **dict(entry), "name": str(name)}))
            else:
                raise ConfigError(f"held-out domain {name!r}: give a path or a mapping with `path`, got {entry!r}.")
    else:
        specs = [parse_held_out_option(item, tokens) for item in entries]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(f"held-out domain {spec.name!r} is given twice: give each name once.")
        seen.add(spec.name)
    return specs
