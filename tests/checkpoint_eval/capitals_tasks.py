"""A custom task for the CLI tests: `custom|capitals|0`, read from the jsonl files next to this
module (hf_repo is a local folder), scored by log-likelihood of multi-token choices."""

from pathlib import Path

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig


def capitals_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        task_name=task_name,
        query=f"Question: What is the capital of {line['country']}?\nAnswer:",
        choices=[f" {city}" for city in line["choices"]],
        gold_index=line["label"],
    )


TASKS_TABLE = [
    LightevalTaskConfig(
        name="capitals",
        prompt_function=capitals_prompt,
        hf_repo=str(Path(__file__).parent / "data" / "capitals"),
        hf_subset="default",
        evaluation_splits=["test"],
        metrics=[Metrics.loglikelihood_acc],
    )
]
