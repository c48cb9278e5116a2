"""Docs grouped by sampling method: the requests one model call of each kind answers.

The order is fixed by the task order and each task's doc order (never by a hash), so every
rank builds the same groups, and responses map back to (task, doc) by position.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from lighteval_nanotron.requests import Doc, SamplingMethod

METHOD_ORDER = (SamplingMethod.LOGPROBS, SamplingMethod.PERPLEXITY, SamplingMethod.GENERATIVE)
"""Cheap forwards first, generation last."""


@dataclass
class RequestGroup:
    """Docs asked with one sampling method in one model call, with where each came from."""

    method: SamplingMethod
    unconditioned: bool = False
    """LOGPROBS only: also score each choice after `doc.unconditioned_query` (PMI metrics)."""
    docs: list[Doc] = field(default_factory=list)
    task_names: list[str] = field(default_factory=list)
    doc_indices: list[int] = field(default_factory=list)
    """Position of each doc in its task's doc list (for merging metrics across methods)."""


def group_requests(
    docs_by_task: Mapping[str, list[Doc]], unconditioned_tasks: Collection[str] = ()
) -> list[RequestGroup]:
    """One group per sampling method in use, in `METHOD_ORDER`; LOGPROBS docs of the tasks in
    `unconditioned_tasks` form a group of their own, so only they pay for the extra forwards."""
    keys = [(SamplingMethod.LOGPROBS, False), (SamplingMethod.LOGPROBS, True)]
    keys += [(method, False) for method in METHOD_ORDER[1:]]
    groups = {key: RequestGroup(*key) for key in keys}
    for task_name, docs in docs_by_task.items():
        for index, doc in enumerate(docs):
            for method in dict.fromkeys(SamplingMethod(m) for m in doc.sampling_methods):
                unconditioned = method is SamplingMethod.LOGPROBS and task_name in unconditioned_tasks
                group = groups[(method, unconditioned)]
                group.docs.append(doc)
                group.task_names.append(task_name)
                group.doc_indices.append(index)
    return [group for group in groups.values() if group.docs]
