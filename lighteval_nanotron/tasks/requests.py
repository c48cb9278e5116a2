"""The unit of evaluation: a `Doc` (one benchmark sample), the ways a model is asked about it, and its answer.

Both `metrics/` and `models/` import these types; this module imports neither.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class SamplingMethod(str, Enum):
    """What the model is asked to do with a doc; each metric declares the one it needs."""

    GENERATIVE = "GENERATIVE"
    LOGPROBS = "LOGPROBS"
    PERPLEXITY = "PERPLEXITY"


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


@dataclass
class ModelResponse:
    """A model's answer to one doc (lighteval's `ModelResponse`).

    - LOGPROBS: `logprobs[i]` is the summed log-probability of choice `i` given the context,
      `argmax_logits_eq_gold[i]` whether greedy decoding reproduces choice `i` token by token,
      `output_tokens[i]` the continuation tokens of choice `i`, and `unconditioned_logprobs[i]`
      the same choice scored after the doc's `unconditioned_query` (PMI), when asked for.
    - PERPLEXITY: `logprobs == [total]`, the rolling log-likelihood of the whole text, and
      `output_tokens == [tokens]`.
    - GENERATIVE: `text[k]` the k-th generation (stop sequences removed), `output_tokens[k]` its
      tokens.
    """

    input: str | None = None
    input_tokens: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    output_tokens: list[list[int]] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    argmax_logits_eq_gold: list[bool] = field(default_factory=list)
    unconditioned_logprobs: list[float] | None = None
    truncated_tokens_count: int = 0
    padded_tokens_count: int = 0
    non_finite_logits: bool = False
    """Generation met NaN/inf logits for this doc (its text is then meaningless)."""
