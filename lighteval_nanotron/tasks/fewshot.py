"""Few-shot example selection, per-doc mode: deterministic, seeded by local generators only.

Fixed-order methods (`balanced`, `random`, `sequential`) compute one ordering of the few-shot pool
per task, so every doc gets the same prefix (minus itself). Sampling methods draw per doc from a
generator seeded by the doc's key, so a doc's examples do not depend on which other docs are
evaluated or in which order. `fewshot_lighteval` holds the other mode, lighteval 0.11's draws.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from enum import Enum

from lighteval_nanotron.requests import Doc


class FewShotSelection(str, Enum):
    balanced = "balanced"
    random = "random"
    sequential = "sequential"
    random_sampling_from_train = "random_sampling_from_train"
    random_sampling = "random_sampling"

    @classmethod
    def names(cls) -> list[str]:
        return [m.value for m in cls]

    @property
    def samples_per_doc(self) -> bool:
        return self in (FewShotSelection.random_sampling, FewShotSelection.random_sampling_from_train)


class FewShotDraws(str, Enum):
    """How the examples are drawn: lighteval 0.11's way, or independently per doc."""

    lighteval = "lighteval"
    per_doc = "per_doc"

    @classmethod
    def names(cls) -> list[str]:
        return [m.value for m in cls]


def fewshot_label(doc: Doc) -> str:
    """The class a doc is balanced on: `fewshot_sorting_class`, else its first gold answer."""
    if doc.fewshot_sorting_class is not None:
        return str(doc.fewshot_sorting_class)
    try:
        golds = doc.get_golds()
    except (IndexError, TypeError):
        return ""
    return str(golds[0]) if golds else ""


def balanced_order(labels: Sequence[str], seed: int) -> list[int]:
    """Pool indices alternating over labels, most frequent label first (ties broken by `seed`)."""
    rng = random.Random(seed)
    by_label: dict[str, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        by_label[label].append(index)
    by_count: dict[int, list[str]] = defaultdict(list)
    for label in sorted(by_label):
        by_count[len(by_label[label])].append(label)
    ordered_labels: list[str] = []
    for count in sorted(by_count, reverse=True):
        tied = by_count[count]
        rng.shuffle(tied)
        ordered_labels.extend(tied)
    queues = []
    for label in ordered_labels:
        members = list(by_label[label])
        rng.shuffle(members)
        queues.append(members)
    order: list[int] = []
    for position in range(max((len(q) for q in queues), default=0)):
        order.extend(q[position] for q in queues if position < len(q))
    return order


def fixed_order(method: FewShotSelection, pool: Sequence[Doc], seed: int) -> list[int]:
    """The pool ordering shared by every doc of a task, for the fixed-order methods."""
    if method is FewShotSelection.balanced:
        return balanced_order([fewshot_label(doc) for doc in pool], seed)
    order = list(range(len(pool)))
    if method is FewShotSelection.random:
        random.Random(seed).shuffle(order)
    return order


class FewShotSampler:
    """Picks few-shot examples for the docs of one task from its few-shot pool."""

    def __init__(self, method: str | None, pool: Sequence[Doc], seed: int = 0):
        self.method = FewShotSelection(method or "balanced")
        self.pool = pool
        self.seed = seed
        self._order: list[int] | None = None

    def _shared_order(self) -> list[int]:
        if self._order is None:
            self._order = fixed_order(self.method, self.pool, self.seed)
        return self._order

    def sample(self, num_fewshots: int, doc_key: Hashable, is_self: Callable[[int], bool]) -> list[Doc]:
        """Return up to `num_fewshots` pool docs for the doc `doc_key`, never one where `is_self`."""
        if num_fewshots <= 0 or not self.pool:
            return []
        if self.method.samples_per_doc:
            indices = self._sample_for_doc(num_fewshots, doc_key, is_self)
        else:
            indices = []
            for index in self._shared_order():
                if not is_self(index):
                    indices.append(index)
                    if len(indices) == num_fewshots:
                        break
        return [self.pool[i] for i in indices]

    def _sample_for_doc(self, num_fewshots: int, doc_key: Hashable, is_self: Callable[[int], bool]) -> list[int]:
        # A string seed is hashed with SHA-512 by `random`, independent of PYTHONHASHSEED.
        rng = random.Random(f"{self.seed}:{doc_key}")
        size = len(self.pool)
        drawn = rng.sample(range(size), min(size, num_fewshots + 1))
        picked = [i for i in drawn if not is_self(i)][:num_fewshots]
        if len(picked) < min(num_fewshots, size - 1):
            candidates = [i for i in range(size) if not is_self(i)]
            picked = rng.sample(candidates, min(num_fewshots, len(candidates)))
        return picked
