"""Text normalizers (applied to golds and predictions) and log-probability normalizations."""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

from lighteval_nanotron.errors import MetricError

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
_GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")
GSM8K_INVALID = "[invalid]"


def helm_normalizer(text: str) -> str:
    """HELM / QuAC normalization: lower case, no punctuation, no articles, collapsed spaces.

    The text is split on spaces and hyphens first, and each piece that parses as a number is
    written as a float, so "1" and "1.0" normalize to the same string.
    """
    pieces = []
    for piece in re.split(" |-", text):
        piece = "".join(ch for ch in piece.lower() if ch not in _PUNCTUATION)
        try:
            piece = str(float(piece))
        except ValueError:
            pass
        piece = " ".join(_ARTICLES.sub(" ", piece).split())
        if piece:
            pieces.append(piece)
    return " ".join(pieces).strip()


def harness_triviaqa_normalizer(text: str) -> str:
    """lm-evaluation-harness TriviaQA normalization: lower case, ASCII punctuation removed."""
    return text.lower().translate(str.maketrans("", "", string.punctuation))


def gsm8k_normalizer(text: str) -> str:
    """The number after the first `#### ` marker (GSM8K's answer format), commas removed.

    Returns "[invalid]" when there is no marker, as OpenAI's reference script does. A trailing
    sentence period ("#### 72.") is dropped so it does not break an exact match.
    """
    match = _GSM8K_ANSWER.search(text)
    if match is None:
        return GSM8K_INVALID
    return match.group(1).strip().replace(",", "").rstrip(".")


NORMALIZERS: dict[str, Callable[[str], str]] = {
    "helm": helm_normalizer,
    "helm_normalizer": helm_normalizer,
    "harness_triviaqa": harness_triviaqa_normalizer,
    "harness_triviaqa_normalizer": harness_triviaqa_normalizer,
    "gsm8k": gsm8k_normalizer,
    "gsm8k_normalizer": gsm8k_normalizer,
}


def parse_normalizer(value: object) -> Callable[[str], str] | None:
    """A text normalizer from a callable, None, or its name in a task spec (`helm`, `gsm8k`, ...)."""
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        if value.lower() in ("none", ""):
            return None
        if value in NORMALIZERS:
            return NORMALIZERS[value]
    raise MetricError(
        f"Unknown text normalizer {value!r}. Use a callable str -> str, None, or one of: "
        f"{', '.join(sorted(NORMALIZERS))}."
    )


@dataclass(frozen=True)
class LogProbCharNorm:
    """Divide each choice's log-probability by its length in characters.

    `ignore_first_space`: do not count a leading space of the choice (choices written as " A",
    " B" to control tokenization).
    """

    name: str = "norm"
    ignore_first_space: bool = False


@dataclass(frozen=True)
class LogProbTokenNorm:
    """Divide each choice's log-probability by its number of continuation tokens."""

    name: str = "norm_token"


@dataclass(frozen=True)
class LogProbPMINorm:
    """Pointwise mutual information: log p(choice | query) - log p(choice | unconditioned query)."""

    name: str = "norm_pmi"


LogProbNormalization = LogProbCharNorm | LogProbTokenNorm | LogProbPMINorm

_NORMALIZATION_NAMES: dict[str, LogProbNormalization | None] = {
    "none": None,
    "char": LogProbCharNorm(ignore_first_space=True),
    "token": LogProbTokenNorm(),
    "pmi": LogProbPMINorm(),
}
_NORMALIZATION_CLASSES = {cls.__name__: cls for cls in (LogProbCharNorm, LogProbTokenNorm, LogProbPMINorm)}


def parse_logprob_normalization(value: object) -> LogProbNormalization | None:
    """A log-prob normalization from an instance, None, or a task-spec string.

    Strings: `none`, `char` (LogProbCharNorm with ignore_first_space=True), `token`, `pmi`, or a
    constructor call with literal arguments such as `LogProbCharNorm(ignore_first_space=False)`.
    """
    if value is None or isinstance(value, (LogProbCharNorm, LogProbTokenNorm, LogProbPMINorm)):
        return value
    if isinstance(value, str):
        key = value.strip()
        if key.lower() in _NORMALIZATION_NAMES:
            return _NORMALIZATION_NAMES[key.lower()]
        parsed = _parse_constructor(key)
        if parsed is not None:
            return parsed
    raise MetricError(
        f"Unknown logprob_normalization {value!r}. Use none, char, token, pmi, an instance of "
        "LogProbCharNorm / LogProbTokenNorm / LogProbPMINorm, or e.g. 'LogProbCharNorm(ignore_first_space=True)'."
    )


def _parse_constructor(text: str) -> LogProbNormalization | None:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args):
        return None
    cls = _NORMALIZATION_CLASSES.get(node.func.id)
    if cls is None:
        return None
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise MetricError(f"Invalid arguments in {text!r}: {exc}. Fix the normalization in the task spec.") from exc


def normalize_log_probs(
    normalization: LogProbNormalization | None,
    logprobs: list[float],
    choices: list[str],
    choices_tokens: list[list[int]] | None = None,
    unconditioned_logprobs: list[float] | None = None,
) -> list[float]:
    """Apply `normalization` to the per-choice summed log-probabilities.

    Empty choices count as length 1 so a degenerate choice cannot divide by zero.
    """
    if normalization is None:
        return list(logprobs)
    if isinstance(normalization, LogProbCharNorm):
        return [
            lp / max(_char_length(choice, normalization.ignore_first_space), 1) for lp, choice in zip(logprobs, choices)
        ]
    if isinstance(normalization, LogProbTokenNorm):
        if choices_tokens is None or len(choices_tokens) < len(logprobs):
            raise MetricError(
                "Token normalization needs ModelResponse.output_tokens for every choice; the model "
                "backend must fill output_tokens[i] with choice i's continuation tokens."
            )
        return [lp / max(len(tokens), 1) for lp, tokens in zip(logprobs, choices_tokens)]
    if isinstance(normalization, LogProbPMINorm):
        if unconditioned_logprobs is None or len(unconditioned_logprobs) < len(logprobs):
            raise MetricError(
                "PMI normalization needs ModelResponse.unconditioned_logprobs for every choice; the "
                "engine must score doc.unconditioned_query (metric.requires_unconditioned_logprobs is True)."
            )
        return [lp - ulp for lp, ulp in zip(logprobs, unconditioned_logprobs)]
    raise MetricError(f"Unknown logprob normalization {normalization!r}.")


def _char_length(choice: str, ignore_first_space: bool) -> int:
    if ignore_first_space and choice.startswith(" "):
        return len(choice) - 1
    return len(choice)
