"""Write the prompts lighteval 0.11 renders for the leaderboard few-shot tasks on the shipped rows.

Needs lighteval 0.11 in its own environment (it is not a dependency of this project):

    python3 -m venv /tmp/le011 && /tmp/le011/bin/pip install torch==2.13.0 lighteval==0.11.0 requests
    PYTHONPATH=$PWD /tmp/le011/bin/python scripts/lighteval_fewshot_reference.py \
        tests/tasks/data/lighteval_0.11_leaderboard_fewshots.json

Only the data loader of this project is used (to read the shipped slices into a `DatasetDict`,
as the tasks here do); the docs, their order, the few-shot draws and the prompts are lighteval's:
`LightevalTask.get_docs()` and `PromptManager.prepare_prompt()`. The output holds, per task and
doc in lighteval's evaluation order, the doc id, the ids of its few-shot examples and the
SHA-256 of its plain-text prompt (plus its first full prompt, to read a difference), and the
few-shot ids lighteval draws on the toy task of the tests for every `few_shots_select`, with the
pool in a train split and in the evaluation split, for 1, 2 and 5 examples.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path

import lighteval
from lighteval.metrics.metrics import Metrics
from lighteval.tasks import default_tasks
from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig
from lighteval.tasks.prompt_manager import PromptManager
from lighteval.tasks.requests import Doc

from lighteval_nanotron.tasks.data_dirs import load_subset_dir

SLICES = Path(__file__).resolve().parents[1] / "lighteval_nanotron" / "bundled_data" / "slices"
TASKS = {  # lighteval config, number of few-shot examples (the Open LLM Leaderboard settings)
    "leaderboard|arc:challenge|25": (default_tasks.arc_challenge_leaderboard, 25),
    "leaderboard|hellaswag|10": (default_tasks.hellaswag_leaderboard, 10),
    "leaderboard|winogrande|5": (default_tasks.winogrande_leaderboard, 5),
    "leaderboard|gsm8k|5": (default_tasks.gsm8k_leaderboard, 5),
}
FULL_PROMPTS_PER_TASK = 1
TOY_DATA = Path(__file__).resolve().parents[1] / "tests" / "tasks" / "data" / "toy" / "mc" / "default"
TOY_SELECTIONS = ["balanced", "random", "sequential", "random_sampling", "random_sampling_from_train"]
TOY_POOLS = {"train": (["train", "validation"], "validation"), "eval": (["test"], "test")}  # splits, eval split
TOY_FEWSHOTS = [1, 2, 5]


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


def toy_prompt(line: dict, task_name: str) -> Doc:
    """The toy multiple-choice prompt of tests/tasks/data/toy_tasks.py, with lighteval's Doc."""
    return Doc(
        query=f"Question: {line['question']}\nAnswer:",
        choices=[f" {c}" for c in line["choices"]],
        gold_index=line["answer_index"],
        task_name=task_name,
    )


def toy_draws() -> dict[str, list]:
    """`select/pool/k` -> [[doc id, [few-shot ids]], ...] in lighteval's order, on the toy task."""
    out = {}
    for select in TOY_SELECTIONS:
        for pool, (splits, evaluation_split) in TOY_POOLS.items():
            for num_fewshots in TOY_FEWSHOTS:
                config = LightevalTaskConfig(
                    name="toy",
                    prompt_function=toy_prompt,
                    hf_repo="toy/mc",
                    hf_subset="default",
                    metrics=[Metrics.loglikelihood_acc],
                    hf_avail_splits=splits,
                    evaluation_splits=[evaluation_split],
                    few_shots_select=select,
                    num_fewshots=num_fewshots,
                )
                task = LightevalTask(config)
                task.dataset = load_subset_dir(TOY_DATA)
                out[f"{select}/{pool}/{num_fewshots}"] = [
                    [doc.id, [example.id for example in doc.fewshot_samples]] for doc in task.get_docs()
                ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    args = parser.parse_args()
    out = {"lighteval_version": lighteval.__version__, "toy_draws": toy_draws(), "tasks": {}}
    for name, (config, num_fewshots) in TASKS.items():
        out["tasks"][name] = reference(config, num_fewshots)
        print(f"{name}: {len(out['tasks'][name])} docs")
    args.output.write_text(compact_json(out) + "\n", encoding="utf-8")


def compact_json(value, depth: int = 0) -> str:
    """JSON with one line per doc (the two top levels indented), small and readable in a diff."""
    if depth < 3 and isinstance(value, dict):
        pad = " " * (depth + 1)
        items = [f"{pad}{json.dumps(k)}: {compact_json(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    if depth < 3 and isinstance(value, list):
        pad = " " * (depth + 1)
        return "[\n" + ",\n".join(pad + json.dumps(v, ensure_ascii=False) for v in value) + "\n" + " " * depth + "]"
    return json.dumps(value, ensure_ascii=False)


if __name__ == "__main__":
    main()
