"""Checks of a task's docs before any model call: a doc that would score silently wrong is an error."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc


def check_gold_indices(task_name: str, docs: Sequence[Doc]) -> None:
    """Raise ConfigError naming the task and the row when a doc's gold index does not point at
    one of its choices (a negative index would silently pick a choice from the end)."""
    for row, doc in enumerate(docs):
        if not doc.choices:
            continue
        golds = doc.gold_index if isinstance(doc.gold_index, list) else [doc.gold_index]
        bad = [gold for gold in golds if not isinstance(gold, numbers.Integral) or not 0 <= gold < len(doc.choices)]
        if bad or not golds:
            raise ConfigError(
                f"Task {task_name!r}, row {row} (doc id {doc.id!r}): gold index {doc.gold_index!r} does not point at "
                f"one of its {len(doc.choices)} choices (valid: 0..{len(doc.choices) - 1}). Fix the task's prompt "
                "function or that dataset row."
            )


def check_metric_docs(task_name: str, metrics: Sequence[Any], docs: Sequence[Doc]) -> None:
    """Let each metric refuse docs it cannot score (its sample-level function's `check_docs`),
    e.g. a gold probability on a doc without a wrong choice; raises ConfigError."""
    for metric in metrics:
        check = getattr(getattr(metric, "sample_level_fn", None), "check_docs", None)
        if callable(check):
            check(task_name, docs)
