"""Few-shot examples drawn exactly as lighteval 0.11 draws them, so that prompts (and numbers)
are comparable with lighteval's.

lighteval 0.11 (`LightevalTask.get_docs` and `prompt_manager.FewShotSampler`):

- one `random.Random(42)` shuffles the evaluation docs; `max_samples` keeps the first ones;
- the few-shot pool is ordered once per task with the variance seed (always 0 in `get_docs`):
  `sequential` rotates the pool by `num_fewshots * seed`; `random` and both sampling methods
  keep the file order at seed 0 and shuffle it with `random.Random(seed)` otherwise; `balanced`
  keeps `num_fewshots + 1` examples picked over the labels (see `balanced_pool`);
- `random_sampling` then draws `num_fewshots + 1` examples and `random_sampling_from_train`
  `num_fewshots` examples per doc, with the generator that shuffled the docs, in shuffled order,
  so a doc's examples depend on the docs drawn before it; the other methods give every doc the
  ordered pool;
- the doc itself is meant to be dropped and the first `num_fewshots` kept. (lighteval 0.11
  compares the docs with `!=`, which never matches since the evaluated doc already carries its
  full task name: a doc drawn from its own split can see its own answer. Here it is dropped, and
  each task counts the docs where that made its prompt differ from lighteval's.)

Only local generators are used (lighteval reseeds Python's global `random` for `balanced`).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from itertools import cycle
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.tasks.fewshot import FewShotDraws, FewShotSelection
from lighteval_nanotron.tasks.tables import DEFAULT_SUITES

LIGHTEVAL_VERSION = "0.11"
DOC_SHUFFLE_SEED = 42
"""Seed of lighteval's `random.Random` that shuffles the eval docs, then samples few-shots."""

PER_DOC_SUITES = ("custom", "test")
"""Suites of user tasks: they keep the per-doc draws unless asked (no lighteval number to match)."""


def default_draws(suite: str) -> FewShotDraws:
    """lighteval's draws for the suites lighteval names (`lighteval`, `leaderboard`, `helm`, ...)."""
    if suite in DEFAULT_SUITES and suite not in PER_DOC_SUITES:
        return FewShotDraws.lighteval
    return FewShotDraws.per_doc


def balancing_label(doc: Doc) -> Any:
    """lighteval's balancing key: `fewshot_sorting_class`, else the first gold (not stringified)."""
    if doc.fewshot_sorting_class:
        return doc.fewshot_sorting_class
    return doc.get_golds()[0]


def balanced_pool(labels: Sequence[Any], num_fewshots: int, seed: int) -> list[int]:
    """Indices of lighteval's balanced pool: `num_fewshots + 1` examples over the labels.

    Labels are ordered by count (most frequent first; ties shuffled, in sorted-label order
    before the shuffle), then cycled, each turn popping a random remaining member of the label.
    As in lighteval, a falsy label ends the selection early.
    """
    rng = random.Random(seed)
    members: dict[Any, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        members[label].append(index)
    labels_by_count: dict[int, list[Any]] = defaultdict(list)
    for label in sorted(members):
        labels_by_count[len(members[label])].append(label)
    ordered: list[Any] = []
    for count in sorted(labels_by_count, reverse=True):
        tied = labels_by_count[count]
        rng.shuffle(tied)
        ordered.extend(tied)
    picked: list[int] = []
    remaining = min(len(labels), num_fewshots + 1)
    turns = cycle(ordered)
    while remaining > 0:
        label = next(turns, None)
        if not label:
            break
        left = members[label]
        if not left:
            continue
        picked.append(left.pop(rng.randrange(len(left))))
        remaining -= 1
    return picked


def ordered_pool(method: FewShotSelection, pool: Sequence[Doc], num_fewshots: int, seed: int) -> list[int]:
    """The pool as lighteval orders (and, for `balanced`, cuts) it for one variance seed."""
    if method is FewShotSelection.balanced:
        return balanced_pool([balancing_label(doc) for doc in pool], num_fewshots, seed)
    order = list(range(len(pool)))
    if method is FewShotSelection.sequential:
        shift = (num_fewshots * seed) % len(order) if order else 0
        return order[shift:] + order[:shift]
    if seed != 0:
        random.Random(seed).shuffle(order)
    return order


class LightevalFewShotDraws:
    """lighteval 0.11's few-shot candidates for the docs of one task, in evaluation order."""

    def __init__(self, method: str | None, pool: Sequence[Doc], num_fewshots: int, task_name: str, seed: int = 0):
        self.method = FewShotSelection(method or "balanced")
        self.num_fewshots = num_fewshots
        self.seed = seed
        self.order = ordered_pool(self.method, pool, num_fewshots, seed) if num_fewshots > 0 else []
        self.draw_size = num_fewshots + (self.method is not FewShotSelection.random_sampling_from_train)
        if self.method.samples_per_doc and num_fewshots > 0 and self.draw_size > len(self.order):
            raise ConfigError(
                f"Task {task_name!r}: lighteval's {self.method.value} draws {self.draw_size} few-shot examples "
                f"per doc from a pool of {len(self.order)} docs (lighteval {LIGHTEVAL_VERSION} fails here too). "
                "Ask for fewer few-shot examples, use a bigger few-shot split, or set the task's "
                "fewshot_draws='per_doc'."
            )

    def candidates(self, rng: random.Random) -> Sequence[int]:
        """Pool indices lighteval offers the next doc (advancing the shared generator `rng`); read-only."""
        if self.num_fewshots <= 0:
            return []
        if self.method.samples_per_doc:
            return rng.sample(self.order, self.draw_size)
        return self.order


def shuffled_doc_order(num_docs: int, rng: random.Random) -> list[int]:
    """lighteval's evaluation order: `rng.shuffle` of the docs (the same generator draws next)."""
    order = list(range(num_docs))
    rng.shuffle(order)
    return order
