"""Checks of a task's docs before any model call: a doc that would score silently wrong is an error."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc, SamplingMethod


def check_choices(task_name: str, docs: Sequence[Doc]) -> None:
    """Raise ConfigError naming the task and the row when a doc cannot be scored right: a doc scored
    by the log-probabilities of its choices that has none; a gold index that does not point at one
    of its choices (a negative index would silently pick a choice from the end); a gold choice whose
    text is also a wrong choice's (both get the same log-probability, and which one ranks first is
    decided by position, not by the model)."""
    for row, doc in enumerate(docs):
        where = f"Task {task_name!r}, row {row} (doc id {doc.id!r})"
        if not doc.choices:
            if SamplingMethod.LOGPROBS in doc.sampling_methods:
                raise ConfigError(
                    f"{where}: no choices, but its metrics rank the choices' log-probabilities. Fix the task's "
                    "prompt function (Doc.choices), or drop that row (return None for it, or hf_filter)."
                )
            continue
        golds = doc.gold_index if isinstance(doc.gold_index, list) else [doc.gold_index]
        bad = [gold for gold in golds if not isinstance(gold, numbers.Integral) or not 0 <= gold < len(doc.choices)]
        if bad or not golds:
            raise ConfigError(
                f"{where}: gold index {doc.gold_index!r} does not point at one of its {len(doc.choices)} choices "
                f"(valid: 0..{len(doc.choices) - 1}). Fix the task's prompt function or that dataset row."
            )
        if SamplingMethod.LOGPROBS in doc.sampling_methods:
            _check_gold_is_distinct(where, doc, set(golds))


def _check_gold_is_distinct(where: str, doc: Doc, golds: set[int]) -> None:
    wrong = {repr(choice) for k, choice in enumerate(doc.choices) if k not in golds}
    twice = sorted(repr(doc.choices[g]) for g in golds if repr(doc.choices[g]) in wrong)
    if twice:
        raise ConfigError(
            f"{where}: the gold choice {twice[0]} is also one of its wrong choices (choices {doc.choices!r}, gold "
            f"index {doc.gold_index!r}): the model gives both the same score, so the doc is counted right or wrong "
            "by the choices' order. Fix the task's prompt function or that dataset row (drop the duplicate choice)."
        )


def check_metric_docs(task_name: str, metrics: Sequence[Any], docs: Sequence[Doc]) -> None:
    """Let each metric refuse docs it cannot score (its sample-level function's `check_docs`),
    e.g. a gold probability on a doc without a wrong choice; raises ConfigError."""
    for metric in metrics:
        check = getattr(getattr(metric, "sample_level_fn", None), "check_docs", None)
        if callable(check):
            check(task_name, docs)
