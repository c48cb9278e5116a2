"""Sample-level scores over SEVERAL generations of one doc: majority vote (maj@k) and pass@k.

Semantics are lighteval 0.10's `MajAtK` and `PassAtK`: predictions and the single gold are
stripped (`strip_strings`) and normalized first (an empty prediction stays empty);

- maj@k: the most frequent of the first `k` predictions (ties: the one seen first) is compared
  with the gold (`type_exact_match`: full, prefix or suffix);
- pass@k: each of the first `n` predictions is scored against the gold (exact match, or
  `sample_scoring_function(pred, gold)`); with `c` of them scoring 1, the unbiased estimator of
  Chen et al. (2021), `1 - C(n - c, k) / C(n, k)` (1 when `n - c < k`).

`num_samples` says how many generations per doc the metric needs; a task asks for the largest
of its metrics'. Fewer predictions than that, or more than one gold, raise MetricError rather
than give a number computed on the wrong sample size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics.normalizations import parse_normalizer
from lighteval_nanotron.metrics.params import Parametrizable
from lighteval_nanotron.metrics.sample_generative import EXACT_MATCH_TYPES
from lighteval_nanotron.requests import Doc, ModelResponse

_PARSERS: Mapping[str, Callable[[Any], Any]] = {"normalize_gold": parse_normalizer, "normalize_pred": parse_normalizer}


def _match(pred: str, gold: str, kind: str) -> int:
    if kind == "prefix":
        return int(pred.startswith(gold))
    if kind == "suffix":
        return int(pred.endswith(gold))
    return int(pred == gold)


@dataclass(frozen=True)
class _SamplingScore(Parametrizable):
    k: int = 1
    normalize_gold: Callable[[str], str] | None = None
    normalize_pred: Callable[[str], str] | None = None
    strip_strings: bool = False

    param_parsers: ClassVar[Mapping[str, Callable[[Any], Any]]] = _PARSERS
    label: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise MetricError(f"{self.label}: k must be an integer >= 1, got {self.k!r}.")
        for name in ("normalize_gold", "normalize_pred"):
            object.__setattr__(self, name, parse_normalizer(getattr(self, name)))

    @property
    def num_samples(self) -> int:
        return self.k

    def _gold(self, doc: Doc) -> str:
        golds = doc.get_golds()
        if len(golds) != 1:
            raise MetricError(f"{self.label} needs exactly one gold per doc; doc {doc.id!r} has {len(golds)}.")
        gold = golds[0].strip() if self.strip_strings else golds[0]
        return self.normalize_gold(gold) if self.normalize_gold is not None else gold

    def _pred(self, pred: str) -> str:
        if not pred:
            return ""
        pred = pred.strip() if self.strip_strings else pred
        return self.normalize_pred(pred) if self.normalize_pred is not None else pred

    def _predictions(self, doc: Doc, model_response: ModelResponse, needed: int) -> list[str]:
        if len(model_response.text) < needed:
            raise MetricError(
                f"{self.label} needs {needed} generations per doc; doc {doc.id!r} has {len(model_response.text)} "
                "(set the task's num_samples, or the generation num_samples, to at least that)."
            )
        return [self._pred(p) for p in model_response.text[:needed]]


@dataclass(frozen=True)
class MajAtK(_SamplingScore):
    """1 if the majority answer among the first `k` generations matches the gold, else 0."""

    type_exact_match: str = "full"
    label: ClassVar[str] = "maj@k"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.type_exact_match not in EXACT_MATCH_TYPES:
            raise MetricError(
                f"maj@k: type_exact_match must be one of {', '.join(EXACT_MATCH_TYPES)}, got {self.type_exact_match!r}."
            )

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        gold = self._gold(doc)
        answers = self._predictions(doc, model_response, self.k)
        majority = max(answers, key=answers.count)
        return float(_match(majority, gold, self.type_exact_match))


@dataclass(frozen=True)
class PassAtK(_SamplingScore):
    """Probability that at least one of `k` generations drawn from `n` is correct (unbiased)."""

    n: int | None = None
    sample_scoring_function: str | Callable[[str, str], float] = "full"
    label: ClassVar[str] = "pass@k"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n is not None and (not isinstance(self.n, int) or self.n < self.k):
            raise MetricError(f"pass@k: n must be an integer >= k ({self.k}), got {self.n!r}.")
        scoring = self.sample_scoring_function
        if not callable(scoring) and scoring not in EXACT_MATCH_TYPES:
            raise MetricError(
                f"pass@k: sample_scoring_function must be a callable (pred, gold) -> score or one of "
                f"{', '.join(EXACT_MATCH_TYPES)}, got {scoring!r}."
            )

    @property
    def num_samples(self) -> int:
        return self.n if self.n is not None else self.k

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        gold = self._gold(doc)
        n = self.n if self.n is not None else len(model_response.text)
        predictions = self._predictions(doc, model_response, max(n, self.k))[:n]
        scoring = self.sample_scoring_function
        scores = [scoring(p, gold) if callable(scoring) else _match(p, gold, scoring) for p in predictions]
        return pass_at_k(n, sum(1 for s in scores if s == 1), self.k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """`1 - C(n - c, k) / C(n, k)`, as a stable product."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
