"""Checks of a task's docs before any model call: a doc that would score silently wrong is an error."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc, SamplingMethod


def check_choices(task_name: str, docs: Sequence[Doc]) -> list[str]:
    """Raise ConfigError naming the task and the row when a doc cannot be scored: a doc scored by the
    log-probabilities of its choices that has none; a gold index that does not point at one of its
    choices (a negative index would silently pick a choice from the end). Returns the warnings to
    say once: docs whose gold choice's text is also a wrong choice's. Both get the same
    log-probability and the first of them ranks first, as in lighteval (the scores stay lighteval's),
    so such a doc counts as right or wrong by the choices' order, not by the model. Real benchmark
    data has such rows, so they are said, not refused."""
    tied = []
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
        if SamplingMethod.LOGPROBS in doc.sampling_methods and _gold_text_also_wrong(doc, set(golds)):
            tied.append(row)
    if not tied:
        return []
    return [
        f"task {task_name}: {len(tied)} of {len(docs)} docs have the gold choice's text also as a wrong choice "
        f"(rows {tied[:5]}{' ...' if len(tied) > 5 else ''}): the two tie, the first ranks first (as in lighteval), "
        "so these docs count by the choices' order, not by the model. Fix the prompt function or the data to drop "
        "the duplicate choice."
    ]


def _gold_text_also_wrong(doc: Doc, golds: set[int]) -> bool:
    wrong = {choice for k, choice in enumerate(doc.choices) if k not in golds}
    return any(doc.choices[g] in wrong for g in golds)


def check_metric_docs(task_name: str, metrics: Sequence[Any], docs: Sequence[Doc]) -> None:
    """Let each metric refuse docs it cannot score (its sample-level function's `check_docs`),
    e.g. a gold probability on a doc without a wrong choice; a metric normalized by PMI refuses a
    doc without an `unconditioned_query` (its choices cannot be scored without the question).
    Raises ConfigError."""
    for metric in metrics:
        if getattr(metric, "requires_unconditioned_logprobs", False):
            _check_unconditioned_queries(task_name, metric.metric_name, docs)
        check = getattr(getattr(metric, "sample_level_fn", None), "check_docs", None)
        if callable(check):
            check(task_name, docs)


def _check_unconditioned_queries(task_name: str, metric_name: Any, docs: Sequence[Doc]) -> None:
    for row, doc in enumerate(docs):
        if doc.unconditioned_query is None:
            raise ConfigError(
                f"Task {task_name!r}, row {row} (doc id {doc.id!r}): metric {metric_name!r} normalizes by PMI, which "
                "scores each choice again after the doc's unconditioned_query (the text without the question, e.g. "
                "'Answer:'), and this doc has none. Set Doc.unconditioned_query in the prompt function, or use "
                "another normalization."
            )
