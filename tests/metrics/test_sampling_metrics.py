"""maj@k and pass@k on hand-computed cases (lighteval 0.10's semantics), and what they refuse."""

from __future__ import annotations

import pytest

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.metrics.normalizations import gsm8k_normalizer
from lighteval_nanotron.metrics.sample_sampling import MajAtK, PassAtK, pass_at_k
from lighteval_nanotron.requests import Doc, ModelResponse
from lighteval_nanotron.tasks.lighteval_task import metric_samples


def _doc(gold: str = "4") -> Doc:
    return Doc(query="2+2=", choices=[gold], gold_index=0, id="d")


def _texts(*texts: str) -> ModelResponse:
    return ModelResponse(text=list(texts))


def test_majority_vote_over_the_first_k():
    assert MajAtK(k=3)(_doc(), _texts("4", "5", "4", "5", "5")) == 1.0  # first 3: 4, 5, 4
    assert MajAtK(k=5)(_doc(), _texts("4", "5", "4", "5", "5")) == 0.0  # 5 wins 3 to 2
    assert MajAtK(k=4)(_doc(), _texts("4", "5", "5", "4")) == 1.0  # a tie goes to the answer seen first
    assert MajAtK(k=4)(_doc(), _texts("5", "4", "4", "5")) == 0.0


def test_majority_after_stripping_and_normalizing():
    texts = _texts(" 4 ", "The answer is 4", "4\n", "x")
    assert MajAtK(k=4)(_doc(), texts) == 0.0  # all four differ: " 4 " (first) is not "4"
    assert MajAtK(k=4, strip_strings=True)(_doc(), texts) == 1.0  # "4" twice
    prefix = MajAtK(k=2, type_exact_match="suffix")
    assert prefix(_doc(), _texts("so 4", "so 4")) == 1.0
    assert Metrics.maj_at_8_gsm8k.compute_sample(_doc("#### 4"), _texts(*(["#### 4"] * 5 + ["#### 3"] * 3))) == {
        "maj@8": 1.0
    }
    assert gsm8k_normalizer("#### 4") == gsm8k_normalizer(" #### 4 ".strip())


@pytest.mark.parametrize(
    "n, c, k, expected",
    [(5, 2, 1, 0.4), (5, 2, 2, 0.7), (5, 2, 4, 1.0), (5, 0, 1, 0.0), (10, 3, 3, 1 - 35 / 120), (4, 4, 1, 1.0)],
)
def test_pass_at_k_estimator(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_scores_the_first_n_predictions():
    texts = _texts("4", "3", " 4", "4", "9", "4")  # first 5: exact "4" twice
    assert PassAtK(k=1, n=5)(_doc(), texts) == pytest.approx(0.4)
    assert PassAtK(k=2, n=5)(_doc(), texts) == pytest.approx(0.7)
    assert PassAtK(k=1, n=5, strip_strings=True)(_doc(), texts) == pytest.approx(0.6)
    assert PassAtK(k=1)(_doc(), texts) == pytest.approx(3 / 6)  # n unset: every prediction
    starts = PassAtK(k=1, n=2, sample_scoring_function=lambda pred, gold: float(pred.startswith(gold)))
    assert starts(_doc(), _texts("42", "x")) == pytest.approx(0.5)


def test_metrics_say_how_many_samples_they_need():
    metrics = [Metrics.exact_match, Metrics.maj_at_5, Metrics.pass_at_10]
    assert metric_samples(metrics) == [5, 32]
    assert Metrics.pass_at_1.metric_name == "pass@1:32_samples"


def test_too_few_generations_or_several_golds_are_refused():
    with pytest.raises(MetricError, match="needs 5 generations"):
        MajAtK(k=5)(_doc(), _texts("4", "4"))
    with pytest.raises(MetricError, match="needs 4 generations"):
        PassAtK(k=1, n=4)(_doc(), _texts("4"))
    two_golds = Doc(query="q", choices=["a", "b"], gold_index=[0, 1], id="d")
    with pytest.raises(MetricError, match="exactly one gold"):
        MajAtK(k=1)(two_golds, _texts("a"))
    with pytest.raises(MetricError, match="n must be"):
        PassAtK(k=5, n=2)


def test_same_values_as_lighteval_majatk():
    """The installed lighteval's (0.11+) maj@n and pass@k on the same predictions."""
    lighteval_metrics = pytest.importorskip("lighteval.metrics.metrics_sample")
    from lighteval.models.model_output import ModelResponse as LightevalResponse
    from lighteval.tasks.requests import Doc as LightevalDoc

    cases = [("4", ["4", "5", "4", "5", "5"]), ("4", ["5", "4", "4", "5"]), ("a", [" a", "a ", "b"])]
    for gold, predictions in cases:
        for k in range(1, len(predictions) + 1):
            for strip in (False, True):
                theirs = lighteval_metrics.MajAtN(n=k, strip_strings=strip).compute(
                    doc=LightevalDoc(query="2+2=", choices=[gold], gold_index=0),
                    model_response=LightevalResponse(text=predictions),
                )
                ours = MajAtK(k=k, strip_strings=strip)(_doc(gold), _texts(*predictions))
                assert ours == theirs, (gold, predictions, k, strip)
    their_pass = lighteval_metrics.PassAtK(k=2, n=5)
    assert pass_at_k(5, 2, 2) == pytest.approx(their_pass.pass_at_k([1, 0, 1, 0, 0]))
