"""The leaderboard few-shot tasks render lighteval 0.11's prompts on the shipped rows.

The expected docs, few-shot ids and prompt hashes were written by lighteval 0.11 itself
(`scripts/lighteval_fewshot_reference.py`: lighteval's `LightevalTask.get_docs()` and
`PromptManager.prepare_prompt()` on the bundled slices); lighteval is not needed to run this.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from lighteval_nanotron.tasks import PromptManager, Registry, set_data_dirs
from tests.tasks.toy_paths import DATA_DIR

REFERENCE = json.loads((DATA_DIR / "lighteval_0.11_leaderboard_fewshots.json").read_text(encoding="utf-8"))
LEADERBOARD = [
    "leaderboard|arc:challenge|25",
    "leaderboard|hellaswag|10",
    "leaderboard|winogrande|5",
    "leaderboard|gsm8k|5",
]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("spec", LEADERBOARD)
def test_leaderboard_prompts_equal_lighteval_0_11(spec):
    assert REFERENCE["lighteval_version"] == "0.11.0"
    expected = REFERENCE["tasks"][spec]
    set_data_dirs(["bundled"])
    task = Registry(tasks=spec).load_tasks()[spec]
    docs = task.get_docs()
    manager = PromptManager()

    assert [doc.id for doc in docs] == [row["id"] for row in expected]  # lighteval's evaluation order
    assert [[e.id for e in doc.fewshot_samples] for doc in docs] == [row["fewshot_ids"] for row in expected]
    prompts = [manager.prepare_prompt(doc) for doc in docs]
    assert prompts[0] == expected[0]["prompt"]
    assert [sha256(prompt) for prompt in prompts] == [row["prompt_sha256"] for row in expected]
    assert task.fewshot_record()["same_draws_as"] == "lighteval==0.11"


def test_per_doc_draws_give_other_prompts_on_the_same_task():
    spec = "leaderboard|gsm8k|5"
    set_data_dirs(["bundled"])
    task = Registry(tasks=spec).load_tasks()[spec]
    task.set_fewshot_draws("per_doc")
    docs = task.get_docs()
    assert [doc.id for doc in docs] == [row["id"] for row in REFERENCE["tasks"][spec]]  # same docs, same order
    same = sum(
        [e.id for e in doc.fewshot_samples] == row["fewshot_ids"] for doc, row in zip(docs, REFERENCE["tasks"][spec])
    )
    assert same < len(docs) // 10
