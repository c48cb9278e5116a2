"""Task spec strings: `suite|task|k`, `task|k`, `task`, `suite|task|k|truncate` (deprecated),
with `@param=value` metric parameters, given as a comma list or a file of specs."""

from __future__ import annotations

import ast
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lighteval_nanotron.errors import TaskSpecError
from lighteval_nanotron.steps import step_number

SPEC_FORMS = "suite|task|k, task|k or task (k = number of few-shot examples, default 0)"


@dataclass(frozen=True)
class TaskSpec:
    """One parsed spec; `suite` is None when the spec names no suite."""

    task: str
    suite: str | None = None
    num_fewshots: int = 0
    metric_params: dict[str, Any] = field(default_factory=dict)
    truncate_fewshots: bool | None = None
    text: str = ""


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _split_params(part: str, spec: str) -> tuple[str, dict[str, Any]]:
    head, *params = part.split("@")
    parsed: dict[str, Any] = {}
    for param in params:
        name, sep, value = param.partition("=")
        if not sep or not name.strip():
            raise TaskSpecError(f"Malformed metric parameter {param!r} in task spec {spec!r}: use task@name=value.")
        parsed[name.strip()] = _parse_value(value.strip())
    return head.strip(), parsed


def _parse_int(text: str, spec: str, what: str) -> int:
    """Digits 0-9 only (`steps.step_number`): `int()` also reads `0_5` as 5, `+1` and other scripts' digits (`٣`)."""
    value = step_number(text)
    if value is None and text.startswith("-") and step_number(text[1:]) is not None:
        raise TaskSpecError(f"Task spec {spec!r}: {what} must be >= 0, got {text}.")
    if value is None:
        raise TaskSpecError(f"Task spec {spec!r}: {what} must be an integer, got {text!r}. Use {SPEC_FORMS}.")
    return value


def parse_task_spec(spec: str, known_suites: Iterable[str] = ()) -> TaskSpec:
    """Parse one spec. A 2-part spec whose second part is not a number is read as `suite|task`."""
    text = spec.strip()
    if not text:
        raise TaskSpecError(f"Empty task spec. Use {SPEC_FORMS}.")
    params: dict[str, Any] = {}
    parts = []
    for raw in text.split("|"):
        part, part_params = _split_params(raw, text)
        params.update(part_params)
        parts.append(part)
    if any(not part for part in parts):
        raise TaskSpecError(f"Task spec {text!r} has an empty part. Use {SPEC_FORMS}.")

    truncate = None
    if len(parts) == 1:
        suite, task, k = None, parts[0], "0"
    elif len(parts) == 2:
        if not parts[1].lstrip("-").isdigit() and parts[0] in set(known_suites):
            suite, task, k = parts[0], parts[1], "0"
        else:
            suite, task, k = None, parts[0], parts[1]
    elif len(parts) == 3:
        suite, task, k = parts
    elif len(parts) == 4:
        warnings.warn(
            f"Task spec {text!r}: the 4-part form suite|task|k|truncate is deprecated; "
            "use suite|task|k (truncate_fewshots is set from the 4th part for now).",
            FutureWarning,
            stacklevel=2,
        )
        suite, task, k = parts[:3]
        if parts[3] not in ("0", "1"):
            raise TaskSpecError(f"Task spec {text!r}: the truncate flag (4th part) is 0 or 1, got {parts[3]!r}.")
        truncate = parts[3] == "1"
    else:
        raise TaskSpecError(f"Task spec {text!r} has {len(parts)} '|'-separated parts. Use {SPEC_FORMS}.")
    return TaskSpec(
        task=task,
        suite=suite,
        num_fewshots=_parse_int(k, text, "the number of few-shot examples"),
        metric_params=params,
        truncate_fewshots=truncate,
        text=text,
    )


def _split_specs(text: str) -> list[str]:
    """Specs separated by commas or line breaks (a YAML block `tasks: |` lists one a line)."""
    return [item.strip() for line in text.splitlines() for item in line.split(",") if item.strip()]


def read_task_list(tasks: str | os.PathLike | Iterable[str]) -> list[str]:
    """Spec strings from a comma list, a file (one or more specs a line, `#` comments), or a list.
    A string naming a `.txt` file (no `|`, no `,`) is a file: one that does not exist is an error
    naming it, not an unknown task of that name. `~` and `$VAR` are expanded (a YAML value: no shell
    expanded them)."""
    if isinstance(tasks, str):
        expanded = os.path.expandvars(os.path.expanduser(tasks.strip()))
        names_a_file = expanded.lower().endswith(".txt") and not {"|", ","} & set(expanded)
        if names_a_file or os.path.isfile(expanded):
            tasks = Path(expanded)
    if isinstance(tasks, Path):
        path = Path(tasks)
        if not path.is_file():
            raise TaskSpecError(
                f"Task list file {str(path)!r} does not exist (in {os.getcwd()}): give its path, or the specs "
                "themselves (suite|task|k, comma separated)."
            )
        specs: list[str] = []
        for line in path.read_text(encoding="utf-8-sig").splitlines():  # an editor's byte-order mark is not a spec
            specs.extend(_split_specs(line.split("#", 1)[0]))
        return specs
    if isinstance(tasks, str):
        return _split_specs(tasks)
    return [spec for item in tasks for spec in _split_specs(str(item))]
