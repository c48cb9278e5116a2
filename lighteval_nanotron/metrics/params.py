"""Metric parameters: validated copies of a sample-level function with new settings.

A parametrizable sample-level function is a frozen dataclass; its init fields are its parameters.
Values may be Python objects or strings from a task spec (`task@param=value`): strings are
converted by the class's `param_parsers` entry for that field, else according to the field's
annotation (bool, int, float, str), else with `ast.literal_eval` when that succeeds.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from lighteval_nanotron.errors import MetricError

_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}


class Parametrizable:
    """Mixin for frozen-dataclass sample-level functions whose fields can be set per task."""

    param_parsers: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}


def parametrize(fn: Any, params: Mapping[str, Any], metric_name: str) -> Any:
    """A copy of `fn` with `params` applied; raises MetricError on unknown or invalid params."""
    if not dataclasses.is_dataclass(fn) or isinstance(fn, type):
        raise MetricError(
            f"Metric {metric_name!r} takes no parameters (its sample-level function {fn!r} is not a "
            "dataclass). Remove the '@param=value' part of the task spec or the sample_params."
        )
    fields = {f.name: f for f in dataclasses.fields(fn) if f.init}
    unknown = [name for name in params if name not in fields]
    if unknown:
        known = ", ".join(fields) or "none"
        raise MetricError(
            f"Unknown parameter(s) {', '.join(map(repr, unknown))} for metric {metric_name!r}. "
            f"Known parameters: {known}."
        )
    parsers = getattr(fn, "param_parsers", {})
    converted = {name: _convert(name, value, fields[name], parsers, metric_name) for name, value in params.items()}
    try:
        return dataclasses.replace(fn, **converted)
    except MetricError:
        raise
    except (TypeError, ValueError) as exc:
        raise MetricError(f"Invalid parameters {dict(params)!r} for metric {metric_name!r}: {exc}") from exc


def _convert(name: str, value: Any, field: dataclasses.Field, parsers: Mapping, metric_name: str) -> Any:
    if name in parsers:
        return parsers[name](value)
    if not isinstance(value, str):
        return value
    annotation = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    if annotation == "bool":
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise MetricError(f"Parameter {name!r} of metric {metric_name!r} must be true or false, got {value!r}.")
    if annotation in ("int", "float"):
        try:
            return int(value) if annotation == "int" else float(value)
        except ValueError as exc:
            raise MetricError(
                f"Parameter {name!r} of metric {metric_name!r} must be {annotation}, got {value!r}."
            ) from exc
    if annotation == "str":
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value
