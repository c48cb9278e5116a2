"""What every options dataclass shares: field docstrings read from the source, one type check per
field, choices, and the name a user wrote an option by (for the error that names the fix).

A field's docstring is the string literal under it (the house style); `field_docs(cls)` reads
them with `ast`, so the CLI help and docs/options.md come from the same text as the code.
"""

import ast
import dataclasses
import inspect
import math
import os
import re
import textwrap
import types
import typing
from functools import cache
from typing import Any, Dict, List, Mapping, Sequence, Union

from lighteval_nanotron.errors import ConfigError


def choices(names: Sequence[str], **metadata: Any) -> Dict[str, Any]:
    """Field metadata: the values a field takes (checked, and the CLI flag's `choices`)."""
    return {"choices": tuple(names), **metadata}


def path(**metadata: Any) -> Dict[str, Any]:
    """Field metadata: a file or folder, whose leading `~` is the home folder and `$VAR` / `${VAR}`
    an environment variable, as a shell would read them (a YAML value, or a flag written
    `--output-dir=~/x`, reaches us without a shell: unexpanded, it would name a folder `~` or
    `$SCRATCH` under the working directory)."""
    return {"path": True, **metadata}


def renamed_from(old: str) -> Dict[str, Any]:
    """Field metadata: the option's former name, which a YAML section refuses with an error naming
    the new one (a former name would otherwise read as an unknown key)."""
    return {"renamed_from": old}


SCORES = "scores"
"""Field metadata key: whether an option changes scores, and how a step's identity records it."""
HOW = ("value", "data", "measured")


def scores(how: str = "value", **metadata: Any) -> Dict[str, Any]:
    """Field metadata: the option changes scores, and `how` a step's identity (`setup.step`)
    records it: `value` (its value, under its name, in `config_general.identity`), `data` (through
    each task's docs or held-out windows: their digests, per task), `measured` (as the run measured
    it, under its own key: the model's dtype, the prompt and decoding settings)."""
    if how not in HOW:
        raise ValueError(f"scores(how={how!r}): use one of {HOW}")
    return {SCORES: how, **metadata}


def same_scores(**metadata: Any) -> Dict[str, Any]:
    """Field metadata: the option does not change scores (where results go, speed, progress)."""
    return {SCORES: None, **metadata}


def declares_scores(field: "dataclasses.Field[Any]") -> bool:
    """Whether `field` says whether it changes scores (`scores` or `same_scores`)."""
    return SCORES in field.metadata


def score_values(options: Any) -> Dict[str, Any]:
    """`{name: value}` of the fields of dataclass `options` declared `scores("value")`: the part of
    a step's identity its options give by value."""
    return {
        field.name: getattr(options, field.name)
        for field in dataclasses.fields(options)
        if field.metadata.get(SCORES) == "value"
    }


_VARIABLE = re.compile(r"\$(\w+|\{[^}]*\})")


def expand_path(name: str, value: str) -> str:
    """`value` with `~` and environment variables expanded; ConfigError naming option `name` for a
    variable that is not set (left as written, it would name a folder `$SCRATCH`)."""
    expanded = os.path.expandvars(os.path.expanduser(value))
    unset = _VARIABLE.search(expanded)
    if unset:
        variable = unset.group(0)
        raise ConfigError(f"{name} is {value!r}: {variable} is not set in the environment; set it or write the path.")
    return expanded


@cache
def _own_docs(cls: type) -> Dict[str, str]:
    """`{field: docstring}` of the fields `cls` itself declares."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # no source (a frozen build): no docs
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: Dict[str, str] = {}
    for statement, following in zip(body, body[1:]):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def field_docs(cls: type) -> Dict[str, str]:
    """`{field: docstring}` of every field of dataclass `cls`, inherited ones included."""
    docs: Dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_own_docs(klass))
    return docs


def declaring_class(cls: type, name: str) -> type:
    """The class of `cls`'s MRO that declares field `name`."""
    return next(k for k in cls.__mro__ if name in getattr(k, "__annotations__", {}))


def first_sentence(text: str) -> str:
    """Up to the first period that ends a sentence (one followed by a capital letter, or the end),
    on one line: "e.g. `x`" does not end one."""
    flat = " ".join(text.split())
    for index, char in enumerate(flat):
        rest = flat[index + 1 :]
        if char == "." and (not rest or (rest[0] == " " and rest[1:2].isupper())):
            return flat[:index]
    return flat


UNIONS = (Union, types.UnionType)


def matches_type(value: Any, hint: Any, whole_floats: bool = False) -> bool:
    """Whether `value` is of type `hint` (unions, lists, mappings; a bool is never a number).
    `whole_floats`: a `float` field also takes an int (JSON and YAML write `1e-05` but also `1`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in UNIONS:
        return any(matches_type(value, arg, whole_floats) for arg in args)
    if hint is type(None):
        return value is None
    if origin in (list, List):
        if not isinstance(value, list):
            return False
        return all(matches_type(item, args[0], whole_floats) for item in value) if args else True
    if origin in (dict, Dict) or hint is dict:
        return isinstance(value, Mapping)
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        kinds = (int, float) if hint is float and whole_floats else hint
        return isinstance(value, kinds) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


PLURALS = {bool: "trues or falses", int: "integers", float: "numbers", str: "strings"}


def describe_type(hint: Any) -> str:
    """`Optional[List[str]]` as `a list of strings, or null`, for error messages."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in UNIONS:
        return " or ".join(describe_type(arg) for arg in args)
    if hint is type(None):
        return "null"
    if origin in (list, List):
        return f"a list of {PLURALS.get(args[0], describe_type(args[0]))}" if args else "a list"
    if dataclasses.is_dataclass(hint):
        return "a mapping of its keys"
    if origin in (dict, Dict) and args and args[1] is not Any:
        return f"a mapping of {PLURALS.get(args[0], 'keys')} to {PLURALS.get(args[1], describe_type(args[1]))}"
    if origin in (dict, Dict) or hint is dict:
        return "a mapping"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


@dataclasses.dataclass(kw_only=True)
class Options:
    """Base of every options dataclass: each field's value is checked against its type, its
    `choices` and, a number, that it is finite; a subclass names options as its users write them
    (`named`)."""

    def named(self, option: str) -> str:
        """How a user wrote `option` (the hook: `lighteval_nanotron.<option>`; `eval`: its flag)."""
        return option

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.metadata.get("path") and isinstance(value, str):
                if not value.strip():  # Path("") is the working directory: `--custom-tasks ""` would read `.`
                    raise ConfigError(f"{self.named(field.name)} is empty: give a path, or leave it out.")
                value = expand_path(self.named(field.name), value)
                setattr(self, field.name, value)
            if not matches_type(value, hints[field.name]):
                raise ConfigError(
                    f"{self.named(field.name)} is {value!r}: give {describe_type(hints[field.name])}."
                )
            if isinstance(value, float) and not math.isfinite(value):  # NaN passes every comparison check
                raise ConfigError(f"{self.named(field.name)} is {value!r}: give a finite number.")
            allowed = field.metadata.get("choices")
            if allowed is not None and value is not None and not isinstance(value, list) and value not in allowed:
                raise ConfigError(f"{self.named(field.name)} is {value!r}: use one of {list(allowed)}.")

    def check_positive(self, name: str, fix: str, kind: str = "integer") -> None:
        """A positive `kind` (integer, number), or None (unset); `fix` ends the message, e.g. "or remove it"."""
        value = getattr(self, name)
        if value is not None and value <= 0:
            raise ConfigError(f"{self.named(name)} is {value!r}: set it to a positive {kind} {fix}.")

    def check_not_blank(self, name: str, fix: str) -> None:
        """A string with some text, or None."""
        value = getattr(self, name)
        if value is not None and not value.strip():
            raise ConfigError(f"{self.named(name)} is empty: {fix}.")


def as_list(value: Union[None, str, List[str]]) -> List[str]:
    """A comma-separated string or a list as a list of stripped, non-empty items (None: [])."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [item.strip() for item in items if item and item.strip()]
