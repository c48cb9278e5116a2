"""Truncation said on the console when the requests are prepared: per task, how many docs had their
context cut from the left to fit the model's window, how many continuations are longer than the
window (scored on their last tokens only: their log-likelihood is not the whole continuation's), and
how many generations ask for more new tokens than the window leaves (stopped earlier than asked).
The details' `truncated` column and `summary_tasks.truncated` keep the per-doc context counts."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from lighteval_nanotron.models.interface import PlanningModel
from lighteval_nanotron.pipeline.request_groups import RequestGroup
from lighteval_nanotron.requests import SamplingMethod

logger = logging.getLogger(__name__)


@dataclass
class TaskTruncation:
    docs: int = 0
    """Requests of the task (a doc asked with two sampling methods counts twice)."""
    contexts_cut: int = 0
    most_context_tokens_cut: int = 0
    continuations_cut: int = 0
    most_continuation_tokens_cut: int = 0
    budgets_cut: int = 0
    most_budget_tokens_cut: int = 0


def count_truncation(
    groups: Sequence[RequestGroup], cuts: Sequence[Sequence[tuple[int, int]] | None]
) -> dict[str, TaskTruncation]:
    """`{task: counts}` from each group's per-doc `(context tokens cut, continuation tokens unscored
    or, generating, new tokens beyond the window)` (None: the model does not say). Tasks without any
    truncation are left out."""
    counts: dict[str, TaskTruncation] = {}
    for group, group_cuts in zip(groups, cuts, strict=True):
        if group_cuts is None:
            continue
        generating = group.method is SamplingMethod.GENERATIVE
        for task, (context, after) in zip(group.task_names, group_cuts, strict=True):
            c = counts.setdefault(task, TaskTruncation())
            c.docs += 1
            if context > 0:
                c.contexts_cut += 1
                c.most_context_tokens_cut = max(c.most_context_tokens_cut, context)
            if after > 0 and generating:
                c.budgets_cut += 1
                c.most_budget_tokens_cut = max(c.most_budget_tokens_cut, after)
            elif after > 0:
                c.continuations_cut += 1
                c.most_continuation_tokens_cut = max(c.most_continuation_tokens_cut, after)
    return {task: c for task, c in counts.items() if c.contexts_cut or c.continuations_cut or c.budgets_cut}


def truncation_lines(counts: dict[str, TaskTruncation], max_length: int | None) -> list[str]:
    """One console line per truncated task."""
    window = f"the model's {max_length}-token window" if max_length else "the model's window"
    lines = []
    for task, c in counts.items():
        parts = []
        if c.contexts_cut:
            parts.append(
                f"{c.contexts_cut} of {c.docs} requests have a context longer than {window}: its first tokens are "
                f"cut (up to {c.most_context_tokens_cut})"
            )
        if c.continuations_cut:
            parts.append(
                f"{c.continuations_cut} of {c.docs} requests have a continuation longer than {window}: only its last "
                f"tokens are scored (up to {c.most_continuation_tokens_cut} left out), so its log-likelihood is not "
                "the whole continuation's"
            )
        if c.budgets_cut:
            parts.append(
                f"{c.budgets_cut} of {c.docs} requests ask for more new tokens than {window} leaves: they stop "
                f"earlier (up to {c.most_budget_tokens_cut} tokens fewer)"
            )
        lines.append(f"task {task}: " + "; ".join(parts) + " (per doc: the details' `truncated`).")
    return lines


def report_truncation(model: PlanningModel, groups: Sequence[RequestGroup], plans: Sequence[object]) -> None:
    """Log the truncation of prepared plans once, as a warning, on the model's reporting rank."""
    if not model.is_reporting_rank:
        return
    cuts = [None if plan is None else model.truncation(plan) for plan in plans]
    for line in truncation_lines(count_truncation(groups, cuts), model.max_length):
        logger.warning(line)
