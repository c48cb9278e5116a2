"""The unit of evaluation: a `Doc` (one benchmark sample), the ways a model is asked about it, and its answer.

Both `metrics/` and `models/` import these types; this module imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

from lighteval_nanotron.errors import ConfigError


class SamplingMethod(str, Enum):
    """What the model is asked to do with a doc; each metric declares the one it needs."""

    GENERATIVE = "GENERATIVE"
    LOGPROBS = "LOGPROBS"
    PERPLEXITY = "PERPLEXITY"


@dataclass(frozen=True)
class GenerationParameters:
    """How generative docs are decoded; every field None means "not set here" (see `over`).

    Effective defaults when set nowhere: `temperature` 0 (greedy), `top_k` off, `top_p` off,
    `num_samples` from the task, `seed` 0. Field names are lighteval's `GenerationParameters`'.
    """

    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    num_samples: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        checks = (
            ("temperature", lambda v: isinstance(v, (int, float)) and v >= 0, "a number >= 0 (0: greedy)"),
            ("top_k", lambda v: isinstance(v, int) and v >= 0, "an integer >= 0 (0: off)"),
            ("top_p", lambda v: isinstance(v, (int, float)) and 0 < v <= 1, "a number in (0, 1] (1: off)"),
            ("num_samples", lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
            ("seed", lambda v: isinstance(v, int) and v >= 0, "an integer >= 0"),
        )
        for name, ok, expected in checks:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not ok(value)):
                raise ConfigError(f"generation parameter {name}={value!r}: use {expected}.")

    @classmethod
    def from_dict(cls, values: "Mapping[str, Any] | GenerationParameters | None") -> "GenerationParameters":
        """From a YAML mapping with (a subset of) the field names; unknown keys are refused."""
        if values is None:
            return cls()
        if isinstance(values, GenerationParameters):
            return values
        if not isinstance(values, Mapping):
            raise ConfigError(f"generation parameters must be a mapping of {cls.names()}, got {values!r}.")
        unknown = [key for key in values if key not in cls.names()]
        if unknown:
            raise ConfigError(
                f"unknown generation parameter(s) {unknown}: the known ones are {cls.names()} "
                "(other decoding settings have no equivalent in this engine)."
            )
        return cls(**dict(values))

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def over(self, base: "GenerationParameters") -> "GenerationParameters":
        """These settings where set, `base`'s elsewhere."""
        return replace(base, **{k: v for k, v in asdict(self).items() if v is not None})

    @property
    def samples(self) -> bool:
        """True when decoding draws samples (temperature > 0) instead of taking the argmax."""
        return bool(self.temperature)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


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
