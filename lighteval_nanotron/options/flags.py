"""Command-line flags generated from an options dataclass: one flag per field, named after it
(`max_samples` -> `--max-samples`), typed from its annotation, with its choices and, as help, the
first sentence of its docstring. Nothing here names an option.

    add_flags(parser, CheckpointEvalConfig, names)      # argparse arguments
    given_options(args, CheckpointEvalConfig, names)    # {option: value} of the flags given

Field metadata adjusts the flag where the plain rule does not fit: `flag` (another name, e.g.
`--data-dir`, `--no-progress`), `repeat` (a list given one flag at a time), `positional`,
`flags_of` (a mapping option whose keys are the fields of a dataclass, one flag each: the sampling
flags of `generation`), `metavar`, `examples` (two values a repeated flag takes, for the tests). A flag left
out is absent from `given_options`, so a default applies.
"""

import argparse
import dataclasses
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Dict, Iterable, List

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options.base import UNIONS, expand_path, field_docs, first_sentence


def expanded_path(value: str) -> Path:
    """The argparse `type` of a file or folder argument of a verb without an options dataclass (`report
    --output`, `plot --output-dir`, `convert`'s folders): `~` and `$VAR` read as the options read them
    (`--output=~/r.png` reaches us without a shell: unexpanded, it would write `./~/r.png`)."""
    try:
        return Path(expand_path("the path", value))
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _field(cls: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def _dashed(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_name(cls: type, name: str) -> str:
    """The flag that sets option `name` (`--temperature/--top-k/...` for a `flags_of` mapping)."""
    metadata = _field(cls, name).metadata
    if "flags_of" in metadata:
        return "/".join(_dashed(f.name) for f in dataclasses.fields(metadata["flags_of"]))
    if metadata.get("positional"):
        return name.upper()
    return metadata.get("flag", _dashed(name))


def _members(hint: Any) -> List[Any]:
    """The types of a (possibly Optional / Union) annotation, None left out."""
    if typing.get_origin(hint) in UNIONS:
        return [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return [hint]


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None if field.default is dataclasses.MISSING else field.default


UNSET_LABEL = "Unset: "
"""How an option's docstring says what leaving it out means (its default when that is not a value)."""


def _help(doc: str, default: Any, choices: Iterable[Any] = ()) -> str:
    """The doc's first sentence, then the choices and the default: the value, or for an option
    without one the doc's `Unset: ...` sentence (the checkpoint's dtype, every doc, ...)."""
    flat = " ".join(doc.split())
    named = all(f"`{choice}`" in flat for choice in choices)  # the doc already says them
    notes = [f"one of: {', '.join(map(str, choices))}"] if choices and not named else []
    if default is None and UNSET_LABEL in flat:
        notes.append(f"default: {first_sentence(flat.split(UNSET_LABEL, 1)[1])}")
    elif default not in (None, "", []) and not isinstance(default, bool):
        notes.append(f"default: {' '.join(map(str, default)) if isinstance(default, list) else default}")
    text = first_sentence(doc)
    return f"{text} ({'; '.join(notes)})" if notes else text


def _argument(field: dataclasses.Field, hint: Any, doc: str) -> Dict[str, Any]:
    """argparse keywords of one field's flag (its type, action, choices and help)."""
    default = _default(field)
    keywords: Dict[str, Any] = {"default": None, "help": _help(doc, default, field.metadata.get("choices", ()))}
    members = _members(hint)
    lists = [m for m in members if typing.get_origin(m) in (list, List)]
    if members == [bool]:
        if field.default is True:
            keywords.update(action="store_const", const=False, help=f"Off: {keywords['help']}")
        elif field.default is None:
            keywords.update(action=argparse.BooleanOptionalAction)
        else:
            keywords.update(action="store_const", const=True)
    elif field.metadata.get("repeat") or (lists and str not in members):
        item = typing.get_args(lists[0])[0] if lists else str
        keywords.update(type=item, **({"action": "append"} if field.metadata.get("repeat") else {"nargs": "+"}))
    else:
        keywords["type"] = float if float in members else members[0] if members[0] in (int, str) else str
    if "choices" in field.metadata:
        keywords["choices"] = list(field.metadata["choices"])
    return keywords


def add_flags(container: Any, cls: type, names: Iterable[str]) -> None:
    """Add the flags of options `names` of dataclass `cls` to an argparse parser or group."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    for name in names:
        field = _field(cls, name)
        mapping = field.metadata.get("flags_of")
        if mapping is not None:
            inner_hints, inner_docs = typing.get_type_hints(mapping), field_docs(mapping)
            for inner in dataclasses.fields(mapping):
                keywords = _argument(inner, inner_hints[inner.name], inner_docs.get(inner.name, ""))
                flag = _dashed(inner.name)
                container.add_argument(flag, dest=f"{name}.{inner.name}", metavar=inner.name.upper(), **keywords)
            continue
        keywords = _argument(field, hints[name], docs.get(name, ""))
        if field.metadata.get("positional"):
            keywords.pop("type", None)
            container.add_argument(name, nargs="?", **keywords)
        else:
            flag = flag_name(cls, name)
            if "type" in keywords:
                keywords["metavar"] = field.metadata.get("metavar", flag.lstrip("-").replace("-", "_").upper())
            container.add_argument(flag, dest=name, **keywords)


def given_options(args: argparse.Namespace, cls: type, names: Iterable[str]) -> Dict[str, Any]:
    """`{option: value}` of the flags given on the command line (a mapping option from its flags)."""
    given: Dict[str, Any] = {}
    for name in names:
        mapping = _field(cls, name).metadata.get("flags_of")
        if mapping is not None:
            values = {f.name: getattr(args, f"{name}.{f.name}") for f in dataclasses.fields(mapping)}
            value: Any = {key: item for key, item in values.items() if item is not None} or None
        else:
            value = getattr(args, name)
        if value is not None:
            given[name] = value
    return given


def as_arguments(options: Any, cls: type, names: Iterable[str]) -> List[str]:
    """The flags that give options `names` the values they have in `options` (an instance of `cls`
    or of a subclass): the inverse of `given_options`. An option at its default is left out."""
    hints = typing.get_type_hints(cls)
    arguments: List[str] = []
    for name in names:
        field, value = _field(cls, name), getattr(options, name)
        if value is None or value == _default(field):
            continue
        if "flags_of" in field.metadata:
            for key, item in value.items():
                arguments += [_dashed(key), str(item)]
            continue
        flag, members = flag_name(cls, name), _members(hints[name])
        if isinstance(value, Mapping) and field.metadata.get("repeat"):  # `{name: path}` -> NAME=PATH flags
            value = [_key_value(flag, key, item) for key, item in value.items()]
        if members == [bool]:
            arguments.append(flag if field.default is not None or value else "--no-" + flag[2:])
        elif isinstance(value, list) and field.metadata.get("repeat"):
            for item in value:
                arguments += [flag, str(item)]
        elif isinstance(value, list):
            joined = str in members  # one string that the option splits (`tasks`, `wandb_tags`)
            arguments += [flag, ",".join(map(str, value))] if joined else [flag, *map(str, value)]
        else:
            arguments += [flag, str(value)]
    return arguments


def _key_value(flag: str, key: Any, item: Any) -> str:
    if isinstance(item, (Mapping, list)):
        raise ConfigError(
            f"{key}: {item!r} has settings the {flag} flag cannot carry (it takes NAME=VALUE): give it as a plain "
            "value, or evaluate in the loop."
        )
    return f"{key}={item}"
