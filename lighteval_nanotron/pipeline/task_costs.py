"""What each task cost in one evaluation: model seconds, docs, token positions, docs/s.

The engine answers all tasks' docs of one sampling method in one model call, with docs of
several tasks in the same micro-batches. Each call's measured seconds are split among its docs
in proportion to the token positions computed for each doc (`processed_tokens`: its share of
packed rows and padding, as the model counts it), then summed per task. So the tasks' seconds
add up to the time spent in model calls, and a task's seconds are what its tokens cost at that
call's average rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from lighteval_nanotron.pipeline.model_calls import GroupRun
from lighteval_nanotron.pipeline.request_groups import RequestGroup


@dataclass
class TaskCost:
    """One task's share of an evaluation's model time and work."""

    seconds: float = 0.0
    docs: int = 0
    docs_per_s: float = 0.0
    processed_tokens: int = 0
    """Token positions the model computed for the task's docs (padding and shares of packed rows
    included; below `useful_tokens` only where a prefix is shared across docs)."""
    useful_tokens: int = 0
    """Per doc: its context once plus what is scored or generated."""

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def task_costs(
    groups: Sequence[RequestGroup], runs: Sequence[GroupRun], num_docs: Mapping[str, int]
) -> dict[str, TaskCost]:
    """`{task: TaskCost}` in `num_docs` order. Every rank that got responses can compute it."""
    seconds = dict.fromkeys(num_docs, 0.0)
    processed = dict.fromkeys(num_docs, 0.0)
    useful = dict.fromkeys(num_docs, 0)
    for group, run in zip(groups, runs, strict=True):
        total = sum(run.processed_tokens)
        for k, task in enumerate(group.task_names):
            share = run.processed_tokens[k] / total if total > 0 else 1 / len(group.task_names)
            seconds[task] += run.seconds * share
            processed[task] += run.processed_tokens[k]
            useful[task] += run.useful_tokens[k]
    return {
        task: TaskCost(
            seconds=seconds[task],
            docs=docs,
            docs_per_s=docs / seconds[task] if seconds[task] > 0 else 0.0,
            processed_tokens=round(processed[task]),
            useful_tokens=useful[task],
        )
        for task, docs in num_docs.items()
    }
