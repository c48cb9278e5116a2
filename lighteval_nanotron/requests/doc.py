"""`Doc`: one benchmark sample, as lighteval defines it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from lighteval_nanotron.requests.generation_parameters import GenerationParameters
from lighteval_nanotron.requests.sampling_method import SamplingMethod


@dataclass(slots=True)
class Doc:
    """One evaluation sample, as lighteval defines it.

    The prompt function of a task turns a dataset row into a `Doc`; the task then sets `id`,
    `task_name`, `fewshot_samples`, `sampling_methods` and the generation settings.
    """

    query: str
    choices: list[str]
    gold_index: int | list[int]
    instruction: str | None = None
    images: list[Any] | None = None
    specific: dict | None = None
    unconditioned_query: str | None = None
    original_query: str | None = None

    id: str = ""
    task_name: str = ""

    fewshot_samples: list["Doc"] = field(default_factory=list)
    sampling_methods: list[SamplingMethod] = field(default_factory=list)
    fewshot_sorting_class: str | None = None

    generation_size: int | None = None
    stop_sequences: list[str] | None = None
    use_logits: bool = False
    num_samples: int = 1
    generation_grammar: None = None
    generation_parameters: GenerationParameters | None = None
    """The task's own decoding settings (None: the run's); merged over the engine's at prepare time."""

    def get_golds(self) -> list[str]:
        """The gold answer(s) as strings, in the order of `gold_index`.

        A choice may itself be a list of accepted answers (TriviaQA's aliases): it is flattened.
        """
        indices = self.gold_index if isinstance(self.gold_index, list) else [self.gold_index]
        golds: list[str] = []
        for index in indices:
            choice = self.choices[index]
            golds.extend(choice if isinstance(choice, list) else [choice])
        return golds

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DOCS_DIGEST = "docs_sha256"
"""The `config_tasks` key of a task's docs digest (`docs_digest`): one of a step's identity's
per-task parts, beside a held-out domain's `windows_sha256`."""


def docs_digest(docs: list[Doc]) -> str:
    """SHA-256 of what a task's docs put before the model and score against, in order: query,
    choices, gold, instruction, few-shot examples and generation limits (their count with them)."""

    def part(doc: Doc) -> list[Any]:
        return [doc.query, doc.choices, doc.gold_index, doc.instruction, doc.unconditioned_query,
                doc.generation_size, doc.stop_sequences, doc.num_samples,
                [part(example) for example in doc.fewshot_samples]]  # fmt: skip

    text = json.dumps([part(doc) for doc in docs], ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
