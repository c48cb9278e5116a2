"""Extract the final numeric answer of a math word problem and compare numbers exactly.

Used by `Metrics.expr_gold_metric` (GSM8K-style answers) without sympy: only numbers are
compared, which is what GSM8K needs. Values are parsed as `fractions.Fraction`, so "0.5",
"1/2" and "50%" of 1 compare equal and large integers keep every digit.
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = r"-?\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?\s*%?|-?\.\d+"
_GSM8K_MARKER = re.compile(r"####\s*(" + _NUMBER + r")")
_BOXED = re.compile(r"\\boxed\s*\{\s*(" + _NUMBER + r")\s*\}")
_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*:?\s*(" + _NUMBER + r")", re.IGNORECASE)
_ANY_NUMBER = re.compile(_NUMBER)


def parse_number(text: str) -> Fraction | None:
    """`text` as an exact number ("1,234", "$5", "-3.50", "3/4", "12%"), or None."""
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").strip()
    percent = cleaned.endswith("%")
    cleaned = cleaned.rstrip("%").rstrip(".")
    try:
        value = Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None
    return value / 100 if percent else value


def extract_final_number(text: str) -> Fraction | None:
    """The answer of a worked solution: after `####`, else in the last `\\boxed{}`, else after
    "the answer is", else the last number in the text. None when the text has no number."""
    for pattern in (_GSM8K_MARKER, _BOXED, _ANSWER_IS):
        matches = pattern.findall(text)
        if matches:
            match = matches[0] if pattern is _GSM8K_MARKER else matches[-1]
            return parse_number(match)
    numbers = _ANY_NUMBER.findall(text)
    return parse_number(numbers[-1]) if numbers else None


def numbers_match(pred: Fraction | None, gold: Fraction | None, precision: int) -> bool:
    """Both present and equal once rounded to `precision` decimal places."""
    if pred is None or gold is None:
        return False
    return round(pred, precision) == round(gold, precision)
