"""Write the prompts lighteval 0.11 renders for the leaderboard few-shot tasks on the shipped rows.

Needs lighteval 0.11 in its own environment (it is not a dependency of this project):

    python3 -m venv /tmp/le011 && /tmp/le011/bin/pip install torch==2.13.0 lighteval==0.11.0 requests
    PYTHONPATH=$PWD /tmp/le011/bin/python scripts/lighteval_fewshot_reference.py \
        tests/tasks/data/lighteval_0.11_leaderboard_fewshots.json

Only the data loader of this project is used (to read the shipped slices into a `DatasetDict`,
as the tasks here do); the docs, their order, the few-shot draws and the prompts are lighteval's:
`LightevalTask.get_docs()` and `PromptManager.prepare_prompt()`. The output holds, per task and
doc in lighteval's evaluation order, the doc id, the ids of its few-shot examples and the
SHA-256 of its plain-text prompt (plus three full prompts per task, to read a difference).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path

import lighteval
from lighteval.tasks import default_tasks
from lighteval.tasks.lighteval_task import LightevalTask
from lighteval.tasks.prompt_manager import PromptManager

from lighteval_nanotron.tasks.data_dirs import load_subset_dir

SLICES = Path(__file__).resolve().parents[1] / "lighteval_nanotron" / "bundled_data" / "slices"
TASKS = {  # lighteval config, number of few-shot examples (the Open LLM Leaderboard settings)
    "leaderboard|arc:challenge|25": (default_tasks.arc_challenge_leaderboard, 25),
    "leaderboard|hellaswag|10": (default_tasks.hellaswag_leaderboard, 10),
    "leaderboard|winogrande|5": (default_tasks.winogrande_leaderboard, 5),
    "leaderboard|gsm8k|5": (default_tasks.gsm8k_leaderboard, 5),
}
FULL_PROMPTS_PER_TASK = 3


def reference(config, num_fewshots: int) -> list[dict]:
    config = dataclasses.replace(config, num_fewshots=num_fewshots)
    task = LightevalTask(config)
    task.dataset = load_subset_dir(SLICES / config.hf_repo / config.hf_subset)
    manager = PromptManager()
    rows = []
    for position, doc in enumerate(task.get_docs()):
        prompt = manager.prepare_prompt(doc)
        row = {
            "id": doc.id,
            "fewshot_ids": [example.id for example in doc.fewshot_samples],
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
        }
        if position < FULL_PROMPTS_PER_TASK:
            row["prompt"] = prompt
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    args = parser.parse_args()
    out = {"lighteval_version": lighteval.__version__, "tasks": {}}
    for name, (config, num_fewshots) in TASKS.items():
        out["tasks"][name] = reference(config, num_fewshots)
        print(f"{name}: {len(out['tasks'][name])} docs")
    args.output.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
