"""`capitals_tasks.py` written exactly as for lighteval 0.13: no suite, and the inspect-ai fields that
lighteval's own task files set (`sample_fields`, `solver`, `scorer`, `sample_to_fewshot`, `filter`)."""

from pathlib import Path

from inspect_ai.dataset import Sample
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice
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


def record_to_sample(record: dict) -> Sample:
    return Sample(input=record["country"], target="ABC"[record["label"]], choices=record["choices"])


TASKS_TABLE = [
    LightevalTaskConfig(
        name="capitals",
        prompt_function=capitals_prompt,
        hf_repo=str(Path(__file__).parent / "data" / "capitals"),
        hf_subset="default",
        evaluation_splits=["test"],
        metrics=[Metrics.loglikelihood_acc],
        sample_fields=record_to_sample,
        sample_to_fewshot=lambda sample: f"{sample.input}: {sample.target}",
        filter=lambda sample: sample.input != "",
        solver=[multiple_choice(cache=True)],
        scorer=choice(),
    )
]
