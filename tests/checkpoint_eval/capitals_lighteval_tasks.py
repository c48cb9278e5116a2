"""`capitals_tasks.py` written exactly as for lighteval 0.11: its classes, `metrics=`, `suite=`, its Doc."""

from pathlib import Path

from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc


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
        suite=["custom"],
    )
]
