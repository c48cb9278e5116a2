"""Sample-level scores of GENERATIVE responses: exact match, bag-of-words F1, numeric answer.

Each prediction (`model_response.text[k]`) is compared with each gold (`doc.get_golds()`) and
the pair scores are aggregated with `aggregation_function` (max: any match counts). A response
without any generation scores 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics.normalizations import parse_normalizer
from lighteval_nanotron.metrics.numeric import extract_final_number, numbers_match
from lighteval_nanotron.metrics.params import Parametrizable
from lighteval_nanotron.requests import Doc, ModelResponse

EXACT_MATCH_TYPES = ("full", "prefix", "suffix")
_NORMALIZER_PARSERS: Mapping[str, Callable[[Any], Any]] = {
    "normalize_gold": parse_normalizer,
    "normalize_pred": parse_normalizer,
}


def _pairs_score(doc: Doc, model_response: ModelResponse, score: Callable[[str, str], float], aggregate) -> float:
    scores = [score(gold, pred) for gold in doc.get_golds() for pred in model_response.text]
    return aggregate(scores) if scores else 0


@dataclass(frozen=True)
class ExactMatches(Parametrizable):
    """1 if a prediction equals a gold after optional stripping and normalization, else 0.

    `type_exact_match`: `full` (equal), `prefix` (prediction starts with the gold) or `suffix`
    (prediction ends with the gold). An empty prediction never matches.
    """

    aggregation_function: Callable[[list[float]], float] = max
    normalize_gold: Callable[[str], str] | None = None
    normalize_pred: Callable[[str], str] | None = None
    strip_strings: bool = False
    type_exact_match: str = "full"

    param_parsers: ClassVar[Mapping[str, Callable[[Any], Any]]] = _NORMALIZER_PARSERS

    def __post_init__(self) -> None:
        if self.type_exact_match not in EXACT_MATCH_TYPES:
            raise MetricError(
                f"type_exact_match must be one of {', '.join(EXACT_MATCH_TYPES)}, got {self.type_exact_match!r}."
            )
        for name in ("normalize_gold", "normalize_pred"):
            object.__setattr__(self, name, parse_normalizer(getattr(self, name)))

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        return _pairs_score(doc, model_response, self.score_pair, self.aggregation_function)

    def score_pair(self, gold: str, pred: str) -> int:
        if not pred:
            return 0
        if self.strip_strings:
            gold, pred = gold.strip(), pred.strip()
        if self.normalize_gold is not None:
            gold = self.normalize_gold(gold)
        if self.normalize_pred is not None:
            pred = self.normalize_pred(pred)
        if self.type_exact_match == "prefix":
            return int(pred.startswith(gold))
        if self.type_exact_match == "suffix":
            return int(pred.endswith(gold))
        return int(pred == gold)


@dataclass(frozen=True)
class F1Score(Parametrizable):
    """F1 between the sets of whitespace-separated words of a gold and a prediction.

    0 when either side has no word (as nltk's `f_measure`, which lighteval uses).
    """

    aggregation_function: Callable[[list[float]], float] = max
    normalize_gold: Callable[[str], str] | None = None
    normalize_pred: Callable[[str], str] | None = None
    strip_strings: bool = False

    param_parsers: ClassVar[Mapping[str, Callable[[Any], Any]]] = _NORMALIZER_PARSERS

    def __post_init__(self) -> None:
        for name in ("normalize_gold", "normalize_pred"):
            object.__setattr__(self, name, parse_normalizer(getattr(self, name)))

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        return _pairs_score(doc, model_response, self.score_pair, self.aggregation_function)

    def score_pair(self, gold: str, pred: str) -> float:
        if self.strip_strings:
            gold, pred = gold.strip(), pred.strip()
        if self.normalize_gold is not None:
            gold = self.normalize_gold(gold)
        if self.normalize_pred is not None:
            pred = self.normalize_pred(pred)
        gold_words, pred_words = set(gold.split()), set(pred.split())
        common = len(gold_words & pred_words)
        if common == 0:
            return 0.0
        precision, recall = common / len(pred_words), common / len(gold_words)
        return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class NumericAnswerMatch(Parametrizable):
    """1 if the final number of a prediction equals the final number of a gold, else 0.

    See `numeric.extract_final_number` for how the answer is found (`####`, `\\boxed{}`,
    "the answer is", last number). `precision`: decimal places compared.
    """

    precision: int = 5
    aggregation_function: Callable[[list[float]], float] = max

    def __post_init__(self) -> None:
        if not isinstance(self.precision, int) or self.precision < 0:
            raise MetricError(f"precision must be a non-negative integer, got {self.precision!r}.")

    def __call__(self, doc: Doc, model_response: ModelResponse) -> float:
        return _pairs_score(doc, model_response, self.score_pair, self.aggregation_function)

    def score_pair(self, gold: str, pred: str) -> int:
        return int(numbers_match(extract_final_number(pred), extract_final_number(gold), self.precision))
