"""A generative custom task for the sampling tests: `custom|capitals_gen|0`, the capitals data
answered by generation (a few tokens, exact match)."""

from pathlib import Path

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig


def capitals_gen_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        task_name=task_name,
        query=f"Question: What is the capital of {line['country']}?\nAnswer:",
        choices=[f" {line['choices'][line['label']]}"],
        gold_index=0,
    )


TASKS_TABLE = [
    LightevalTaskConfig(
        name="capitals_gen",
        prompt_function=capitals_gen_prompt,
        hf_repo=str(Path(__file__).parent / "data" / "capitals"),
        hf_subset="default",
        evaluation_splits=["test"],
        generation_size=4,
        stop_sequence=["\n"],
        metrics=[Metrics.exact_match],
    )
]
