"""A synthetic task the demo's training data teaches: continue a counting pattern.

Usage:
    # the demo loads it (configs/demo_train.yaml: custom_tasks: examples/counting_task.py)
    lighteval-nanotron tasks inspect "custom|counting|0" --custom-tasks examples/counting_task.py --num-docs 2
    python examples/counting_task.py     # regenerate examples/data/ (deterministic: the same files)

Two patterns, each a fixed successor rule: digits counting up (`Next: 3 4 5 6` -> ` 7`, wrapping
9 -> 0) and letters A-J counting down (`Next: F E D C` -> ` B`, wrapping A -> J). Every digit
and letter is one token of the demo's tokenizer. The training text (`data/counting_train/`) is
lines of these patterns; the evaluation docs (`data/counting/default/test.jsonl`) are prefixes of
3-6 symbols, one per (pattern, start, length): 80 docs, none repeated.

- `custom|counting|0`: log-likelihood over 4 choices (the next symbol and 3 others of the same
  pattern); chance is 0.25, a model that learned the rule scores 1.
- `custom|counting_gen|0`: the same prompts, one greedy token, exact match with the next symbol;
  chance is about 0 (the vocabulary has 1024 tokens).
"""

import json
import random
from pathlib import Path

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig

DATA = Path(__file__).resolve().parent / "data"
EVAL_REPO = DATA / "counting"
TRAIN_REPO = DATA / "counting_train"
PATTERNS = {"digits": [str(d) for d in range(10)], "letters": list("JIHGFEDCBA")}
"""Each pattern's symbols in order: a symbol is followed by the next one, cyclically."""
PREFIX_LENGTHS = (3, 4, 5, 6)
TRAIN_LINES = 3000
TRAIN_LINE_SYMBOLS = 12
NUM_CHOICES = 4
SEED = 1234


def _run(pattern: str, start: int, length: int) -> list[str]:
    symbols = PATTERNS[pattern]
    return [symbols[(start + i) % len(symbols)] for i in range(length)]


def eval_rows() -> list[dict]:
    """One row per (pattern, start, prefix length), with the answer and 4 shuffled choices."""
    rng = random.Random(SEED)
    rows = []
    for pattern, symbols in PATTERNS.items():
        for start in range(len(symbols)):
            for length in PREFIX_LENGTHS:
                run = _run(pattern, start, length + 1)
                answer = run[-1]
                choices = [answer] + rng.sample([s for s in symbols if s != answer], NUM_CHOICES - 1)
                rng.shuffle(choices)
                rows.append(
                    {"prefix": " ".join(run[:-1]), "answer": answer, "choices": choices, "label": choices.index(answer)}
                )
    rng.shuffle(rows)
    return rows


def train_lines() -> list[str]:
    """The demo's training text: runs of either pattern from random starts."""
    rng = random.Random(SEED + 1)
    lines = []
    for _ in range(TRAIN_LINES):
        pattern = rng.choice(sorted(PATTERNS))
        start = rng.randrange(len(PATTERNS[pattern]))
        lines.append("Next: " + " ".join(_run(pattern, start, TRAIN_LINE_SYMBOLS)))
    return lines


def write_data(root: Path = DATA) -> None:
    """Write the evaluation docs and the training text under `root` (what is committed in data/)."""
    (root / "counting" / "default").mkdir(parents=True, exist_ok=True)
    (root / "counting_train").mkdir(parents=True, exist_ok=True)
    with open(root / "counting" / "default" / "test.jsonl", "w") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in eval_rows())
    with open(root / "counting_train" / "train.jsonl", "w") as stream:
        stream.writelines(json.dumps({"text": line}) + "\n" for line in train_lines())


def counting_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        task_name=task_name,
        query=f"Next: {line['prefix']}",
        choices=[f" {symbol}" for symbol in line["choices"]],
        gold_index=line["label"],
    )


def counting_generative_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=f"Next: {line['prefix']}", choices=[f" {line['answer']}"], gold_index=0)


_COMMON = dict(hf_repo=str(EVAL_REPO), hf_subset="default", hf_avail_splits=["test"], evaluation_splits=["test"])

TASKS_TABLE = [
    LightevalTaskConfig(
        name="counting", prompt_function=counting_prompt, metrics=[Metrics.loglikelihood_acc], **_COMMON
    ),
    LightevalTaskConfig(
        name="counting_gen",
        prompt_function=counting_generative_prompt,
        metrics=[Metrics.exact_match],
        generation_size=1,
        stop_sequence=["\n"],
        **_COMMON,
    ),
]

CHANCE = {"custom|counting|0": {"acc": 1 / NUM_CHOICES}, "custom|counting_gen|0": {"em": 0.0}}
"""Chance level of each metric, for the demo's plots."""


if __name__ == "__main__":
    write_data()
    print(f"wrote {EVAL_REPO} and {TRAIN_REPO}")
