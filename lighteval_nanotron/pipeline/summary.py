"""The `summary_tasks` / `summary_general` sections: content hashes and truncation/padding counts.

Two evaluations with equal hashes saw the same docs, prompts and tokens; a differing
`hash_cont_tokens` with equal prompts means the model answered differently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from lighteval_nanotron.pipeline.result import SampleDetail


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def _combined(hashes: Iterable[str]) -> str:
    """Order-free hash of hashes (sorted first, so doc order does not change it)."""
    return _digest("".join(sorted(hashes)))


def task_summary(details: list[SampleDetail]) -> dict[str, Any]:
    truncated = sum(1 for d in details if d.truncated_tokens_count > 0)
    padded = sum(1 for d in details if d.padded_tokens_count > 0)
    return {
        "hashes": {
            "hash_examples": _combined(_digest(d.query) for d in details),
            "hash_full_prompts": _combined(_digest(d.full_prompt) for d in details),
            "hash_input_tokens": _combined(_digest(repr(d.input_tokens)) for d in details),
            "hash_cont_tokens": _combined(_digest(repr(d.output_tokens)) for d in details),
        },
        "truncated": truncated,
        "non_truncated": len(details) - truncated,
        "padded": padded,
        "non_padded": len(details) - padded,
        "num_samples": len(details),
    }


def summarize(details: Mapping[str, list[SampleDetail]]) -> tuple[dict[str, dict], dict[str, Any]]:
    """(`summary_tasks`, `summary_general`)."""
    per_task = {task: task_summary(rows) for task, rows in details.items()}
    general: dict[str, Any] = {"hashes": {}}
    for key in ("truncated", "non_truncated", "padded", "non_padded", "num_samples"):
        general[key] = sum(summary[key] for summary in per_task.values())
    if per_task:
        for hash_name in next(iter(per_task.values()))["hashes"]:
            general["hashes"][hash_name] = _digest(
                "".join(per_task[task]["hashes"][hash_name] for task in sorted(per_task))
            )
    return per_task, general
