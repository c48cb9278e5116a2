"""Text normalizers and string forms of log-prob normalizations."""

import pytest

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics import (
    LogProbCharNorm,
    LogProbPMINorm,
    LogProbTokenNorm,
    gsm8k_normalizer,
    harness_triviaqa_normalizer,
    helm_normalizer,
)
from lighteval_nanotron.metrics.normalizations import parse_logprob_normalization, parse_normalizer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel-Tower!", "eiffel tower"),
        ("  An apple,  a pear ", "apple pear"),
        ("1", "1.0"),
        ("3.50 dollars", "350.0 dollars"),  # punctuation goes first, as in lighteval
        ("", ""),
        ("Théâtre", "théâtre"),
    ],
)
def test_helm_normalizer(text, expected):
    assert helm_normalizer(text) == expected


def test_harness_triviaqa_normalizer():
    assert harness_triviaqa_normalizer("The U.S.A.!") == "the usa"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("step 1\n#### 72", "72"),
        ("#### 1,234", "1234"),
        ("#### -5", "-5"),
        ("#### 72.", "72"),
        ("The answer is 72", "[invalid]"),
    ],
)
def test_gsm8k_normalizer(text, expected):
    assert gsm8k_normalizer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", None),
        ("char", LogProbCharNorm(ignore_first_space=True)),
        ("token", LogProbTokenNorm()),
        ("PMI", LogProbPMINorm()),
        ("LogProbCharNorm()", LogProbCharNorm(ignore_first_space=False)),
        ("LogProbCharNorm(ignore_first_space=True)", LogProbCharNorm(ignore_first_space=True)),
        ("LogProbTokenNorm()", LogProbTokenNorm()),
    ],
)
def test_parse_logprob_normalization(text, expected):
    assert parse_logprob_normalization(text) == expected


@pytest.mark.parametrize("text", ["chars", "LogProbCharNorm(oops=1)", "os.system('x')", "3"])
def test_parse_logprob_normalization_rejects_unknown(text):
    with pytest.raises(MetricError):
        parse_logprob_normalization(text)


def test_parse_normalizer():
    assert parse_normalizer("helm") is helm_normalizer
    assert parse_normalizer("gsm8k_normalizer") is gsm8k_normalizer
    assert parse_normalizer("none") is None
    assert parse_normalizer(str.lower) is str.lower
    with pytest.raises(MetricError, match="harness_triviaqa"):
        parse_normalizer("nope")
