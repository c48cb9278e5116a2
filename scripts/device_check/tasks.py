"""The device check's tasks for the trained counting model (scripts/gpu_carry.py): the counting
docs that `make gpu-carry` writes (`.gpu-carry/counting-data/counting`, device_check/counting.py) as a
4-choice log-likelihood task and as a greedy continuation of several symbols (long enough to
exercise the KV cache; the trained model is confident at every step, so CUDA and CPU must generate
the same text). The carried folder is `$GPU_CARRY` (default `.gpu-carry`, from the repository root).

    lighteval-nanotron tasks inspect "custom|check_counting_continue|0" \\
        --custom-tasks scripts/device_check/tasks.py --num-docs 2
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loaded by path as a custom tasks file

from device_check.counting import COUNTING_DATA, EVAL_FOLDER, PATTERNS  # noqa: E402
from lighteval_nanotron.metrics import Metrics  # noqa: E402
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / os.environ.get("GPU_CARRY", ".gpu-carry") / COUNTING_DATA / EVAL_FOLDER
CONTINUATION = 6
"""Symbols of the gold continuation (one token each with the tiny tokenizer: the generation budget)."""


def continuation(prefix: str, count: int) -> list[str]:
    """The `count` symbols after `prefix` in its pattern."""
    last = prefix.split()[-1]
    symbols = PATTERNS["digits" if last.isdigit() else "letters"]
    start = symbols.index(last)
    return [symbols[(start + i) % len(symbols)] for i in range(1, count + 1)]


def choice_prompt(line: dict, task_name: str) -> Doc:
    choices = [f" {symbol}" for symbol in line["choices"]]
    return Doc(task_name=task_name, query=f"Next: {line['prefix']}", choices=choices, gold_index=line["label"])


def continue_prompt(line: dict, task_name: str) -> Doc:
    gold = "".join(f" {symbol}" for symbol in continuation(line["prefix"], CONTINUATION))
    return Doc(task_name=task_name, query=f"Next: {line['prefix']}", choices=[gold], gold_index=0)


_DATA = dict(hf_repo=str(DATA), hf_subset="default", hf_avail_splits=["test"], evaluation_splits=["test"])

TASKS_TABLE = [
    LightevalTaskConfig(
        name="check_counting", prompt_function=choice_prompt, metrics=[Metrics.loglikelihood_acc], **_DATA
    ),
    LightevalTaskConfig(
        name="check_counting_continue",
        prompt_function=continue_prompt,
        metrics=[Metrics.exact_match],
        generation_size=CONTINUATION,
        stop_sequence=["\n"],
        **_DATA,
    ),
]
