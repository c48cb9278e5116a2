"""The device check's counting text and docs, generated (deterministic: the same files everywhere).

Two patterns, each a fixed successor rule: digits counting up (`Next: 3 4 5 6` -> ` 7`, wrapping
9 -> 0) and letters A-J counting down (`Next: F E D C` -> ` B`, wrapping A -> J); every digit and
letter is one token of the tiny tokenizer (configs/tiny_tokenizer). The training text is lines of
these patterns; the evaluation docs are prefixes of 3-6 symbols, one per (pattern, start, length):
80 docs, each with the next symbol and 3 other symbols of its pattern as choices. A tiny Llama
trained on the text (scripts/gpu_carry.py) is confident at every step, so two devices must agree.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

PATTERNS = {"digits": "0123456789", "letters": "JIHGFEDCBA"}
"""Each pattern's symbols in order: a symbol is followed by the next one, cyclically."""
PREFIX_LENGTHS = (3, 4, 5, 6)
TRAIN_LINES = 3000
TRAIN_LINE_SYMBOLS = 12
NUM_CHOICES = 4
SEED = 1234
COUNTING_DATA = "counting-data"
"""The carried folder's subfolder (`.gpu-carry/counting-data`) that scripts/gpu_carry.py writes."""
EVAL_FOLDER = "counting"
"""Under the data root: a dataset folder `default/test.jsonl` (the check's tasks read it)."""
TRAIN_FOLDER = "counting_train"
"""Under the data root: `train.jsonl` of `{"text": ...}` lines (the check's model trains on it)."""


def run_of(pattern: str, start: int, length: int) -> list[str]:
    """`length` symbols of `pattern` from index `start`, cyclically."""
    symbols = PATTERNS[pattern]
    return [symbols[(start + i) % len(symbols)] for i in range(length)]


def eval_rows() -> list[dict]:
    """One row per (pattern, start, prefix length), with the answer and 4 shuffled choices."""
    rng = random.Random(SEED)
    rows = []
    for pattern, symbols in PATTERNS.items():
        for start in range(len(symbols)):
            for length in PREFIX_LENGTHS:
                *prefix, answer = run_of(pattern, start, length + 1)
                choices = [answer, *rng.sample([s for s in symbols if s != answer], NUM_CHOICES - 1)]
                rng.shuffle(choices)
                label = choices.index(answer)
                rows.append({"prefix": " ".join(prefix), "answer": answer, "choices": choices, "label": label})
    rng.shuffle(rows)
    return rows


def train_lines() -> list[str]:
    """Runs of either pattern from random starts."""
    rng = random.Random(SEED + 1)
    lines = []
    for _ in range(TRAIN_LINES):
        pattern = rng.choice(sorted(PATTERNS))
        lines.append("Next: " + " ".join(run_of(pattern, rng.randrange(len(PATTERNS[pattern])), TRAIN_LINE_SYMBOLS)))
    return lines


def write_counting_data(root: Path) -> None:
    """The evaluation docs under `root/counting/default/test.jsonl`, the text under `root/counting_train`."""
    (root / EVAL_FOLDER / "default").mkdir(parents=True, exist_ok=True)
    (root / TRAIN_FOLDER).mkdir(parents=True, exist_ok=True)
    with open(root / EVAL_FOLDER / "default" / "test.jsonl", "w") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in eval_rows())
    with open(root / TRAIN_FOLDER / "train.jsonl", "w") as stream:
        stream.writelines(json.dumps({"text": line}) + "\n" for line in train_lines())
