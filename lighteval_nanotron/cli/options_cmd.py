"""`lighteval-nanotron options`: every option of the training hook's section and of `eval`, as the
Markdown reference docs/options.md (generated from the dataclasses; a test checks it is current).

Usage:
    lighteval-nanotron options                       # print the reference
    lighteval-nanotron options > docs/options.md     # regenerate the doc after adding an option
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

INTRO = """# Options: the hook's `lighteval_nanotron:` section and `eval`

Every option is declared once, as a field of a dataclass with its docstring and its check:
`EvaluationOptions` (`lighteval_nanotron/options/`) holds what the training hook and `eval` share;
the hook's `EvaluationConfig` and `eval`'s `CheckpointEvalConfig` include it and add their own.
A YAML key of the hook's section is the option's name; `eval`'s flag is generated from it
(`max_samples` -> `--max-samples`); a bad value fails before any model work with one error naming
the key (`lighteval_nanotron.max_samples is 0: ...`) or the flag (`--max-samples is 0: ...`).
A file or folder option's leading `~` is your home folder and `$VAR` an environment variable (of the process
that reads the option: the training's for the hook's keys), in a YAML value and in `--output-dir=~/x` alike
(no shell expands those); a variable that is not set is refused.
`--lighteval-config-path` and Nanotron's `lighteval:` section set the same options through
lighteval's field names ([eval.md](eval.md#lightevals-eval-yaml-field-by-field)).

"changes scores" says how a step's identity records an option ([tracking](tracking.md#identity)):
by its value, through each task's data (docs and held-out windows digests), or as the run measured
it (the model's dtype, the prompt and tokenizer settings); a results file never mixes two values.

This page is the output of `lighteval-nanotron options` (regenerate it with
`lighteval-nanotron options > docs/options.md` after adding an option).
"""

SHARED = "the hook and `eval`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: dataclasses.Field) -> str:
    if field.default_factory is not dataclasses.MISSING:
        value: Any = field.default_factory()
    elif field.default is dataclasses.MISSING:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return f"`[{', '.join(map(str, value))}]`"
    return f"`{value}`"


SCORES_CELL = {"value": "yes: by value", "data": "yes: per task data", "measured": "yes: as measured", None: "no"}
"""How the "changes scores" column reads each declaration (`options.base.scores`, docs/tracking.md#identity)."""


def _table(cls: type, owner: type, flags: bool, key: str = "option") -> list[str]:
    from lighteval_nanotron.options.base import SCORES, declaring_class, field_docs
    from lighteval_nanotron.options.flags import flag_name

    docs = field_docs(cls)
    fields = [field for field in dataclasses.fields(cls) if declaring_class(cls, field.name) is owner]
    scores = any(SCORES in field.metadata for field in fields)
    header = f"| {key} |" + (" `eval` flag |" if flags else "") + " default |" + (" changes scores |" if scores else "")
    header += " meaning |"
    lines = [header, "|---" * header.count(" | ") + "|---|"]
    for field in fields:
        cells = [f"`{field.name}`"]
        if flags:
            cells.append(" ".join(f"`{flag}`" for flag in flag_name(cls, field.name).split("/")))
        cells.append(_default(field))
        if scores:
            cells.append(SCORES_CELL[field.metadata[SCORES]] if SCORES in field.metadata else "-")
        cells.append(_cell(docs.get(field.name, "")))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def reference() -> str:
    """docs/options.md: one table per dataclass, shared options first."""
    from lighteval_nanotron.options import (
        BatchingOptions,
        EvaluationOptions,
        LayoutOptions,
        TokenizationOptions,
        TrackingOptions,
    )
    from lighteval_nanotron.options.base import first_sentence
    from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
    from lighteval_nanotron.options.hook import EvaluationConfig
    from lighteval_nanotron.options.launch import AsyncEvaluationConfig, SlurmSettings

    sections = [
        (CheckpointEvalConfig, EvaluationOptions, SHARED, True),
        (CheckpointEvalConfig, TokenizationOptions, SHARED, True),
        (CheckpointEvalConfig, BatchingOptions, SHARED, True),
        (CheckpointEvalConfig, TrackingOptions, SHARED, True),
        (EvaluationConfig, EvaluationConfig, "the hook's section only", False),
        (CheckpointEvalConfig, CheckpointEvalConfig, "`eval` only", True),
        (CheckpointEvalConfig, LayoutOptions, "`eval`, and the hook's `asynchronous:` keys", True),
    ]
    lines = [INTRO]
    for cls, owner, who, flags in sections:
        lines += [f"## {first_sentence(owner.__doc__ or '')} ({who})", "", *_table(cls, owner, flags), ""]
    # The hook's `asynchronous:` option is a mapping of its own keys (docs/hook.md, "Asynchronous evaluation").
    for cls, where in ((AsyncEvaluationConfig, "asynchronous"), (SlurmSettings, "asynchronous.slurm")):
        title = f"## {first_sentence(cls.__doc__ or '')} (the hook's `{where}:` keys)"
        lines += [title, "", *_table(cls, cls, False, key=f"`{where}:` key"), ""]
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `options` verb to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "options",
        help="print every option of the hook's section and of eval (docs/options.md)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    print(reference(), end="")
    return 0
