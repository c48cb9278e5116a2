"""The `summary_tasks` / `summary_general` sections: content hashes and truncation/padding counts,
computed as lighteval 0.10's `DetailsLogger` computes them.

Per row (one doc and sampling method, which lighteval sees as one model response): the xxHash64
hex digest of the query, of the full prompt, of `str([input_tokens])` and of
`str([output_tokens])`. Per task: the digest of the row digests, sorted, concatenated. Over all
tasks: the digest of the task digests concatenated in task-name order. Two evaluations with equal
hashes saw the same docs, prompts and tokens; a differing `hash_cont_tokens` with equal prompts
means the model answered differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import xxhash

from lighteval_nanotron.pipeline.result import SampleDetail

HASH_NAMES = ("hash_examples", "hash_full_prompts", "hash_input_tokens", "hash_cont_tokens")
COUNT_NAMES = ("truncated", "non_truncated", "padded", "non_padded")


def _digest(text: str) -> str:
    """xxHash64 of the UTF-8 text (what xxhash < 4 hashed when lighteval passed it a str)."""
    return xxhash.xxh64(text.encode("utf-8")).hexdigest()


def _combined(hashes: Iterable[str]) -> str:
    """Order-free hash of hashes (sorted first, so doc order does not change it)."""
    return _digest("".join(sorted(hashes)))


def row_hashes(detail: SampleDetail) -> tuple[str, str, str, str]:
    """(example, full prompt, input tokens, continuation tokens) digests of one row."""
    return (
        _digest(detail.query),
        _digest(str(detail.full_prompt)),
        _digest(str([detail.input_tokens])),
        _digest(str([detail.output_tokens])),
    )


def task_summary(details: list[SampleDetail]) -> dict[str, Any]:
    rows = [row_hashes(d) for d in details]
    truncated = sum(1 for d in details if d.truncated_tokens_count > 0)
    padded = sum(1 for d in details if d.padded_tokens_count > 0)
    return {
        "hashes": {name: _combined(row[i] for row in rows) for i, name in enumerate(HASH_NAMES)},
        "truncated": truncated,
        "non_truncated": len(details) - truncated,
        "padded": padded,
        "non_padded": len(details) - padded,
        "num_samples": len(details),
    }


def general_summary(per_task: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`summary_general` from the `summary_tasks` entries (also after merging results files)."""
    general: dict[str, Any] = {"hashes": {}}
    for key in (*COUNT_NAMES, "num_samples"):
        general[key] = sum(int(summary.get(key) or 0) for summary in per_task.values())
    if per_task:
        for name in HASH_NAMES:
            general["hashes"][name] = _digest(
                "".join(str(per_task[task].get("hashes", {}).get(name, "")) for task in sorted(per_task))
            )
    return general


def summarize(details: Mapping[str, list[SampleDetail]]) -> tuple[dict[str, dict], dict[str, Any]]:
    """(`summary_tasks`, `summary_general`)."""
    per_task = {task: task_summary(rows) for task, rows in details.items()}
    return per_task, general_summary(per_task)
