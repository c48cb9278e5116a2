"""Held-out metrics: the formulas of docs/metrics.md, checked against direct computations."""

import math

import numpy as np
import pytest

from lighteval_nanotron.metrics.held_out import domain_scores, macro_scores, micro_scores


def test_domain_scores_and_their_standard_errors():
    nll = np.array([30.0, 34.0, 29.0, 40.0])
    sizes = np.array([40, 35, 50, 41])
    scores = domain_scores(nll, 10, sizes)
    per_window = nll / 10
    assert scores["loss"] == pytest.approx(per_window.mean())
    # equal windows: the ratio estimator's error is the standard error of the per-window means
    assert scores["loss_stderr"] == pytest.approx(per_window.std(ddof=1) / math.sqrt(4))
    assert scores["perplexity"] == pytest.approx(math.exp(per_window.mean()))
    assert scores["perplexity_stderr"] == pytest.approx(scores["perplexity"] * scores["loss_stderr"])
    assert scores["bits_per_byte"] == pytest.approx(nll.sum() / math.log(2) / sizes.sum())
    bpb = scores["bits_per_byte"]
    residual = nll / math.log(2) - bpb * sizes
    expected = math.sqrt(4 / 3 * (residual**2).sum()) / sizes.sum()
    assert scores["bits_per_byte_stderr"] == pytest.approx(expected)


def test_one_window_has_an_unknown_standard_error():
    scores = domain_scores(np.array([12.0]), 4, np.array([10]))
    assert scores["loss"] == 3.0 and math.isnan(scores["loss_stderr"]) and math.isnan(scores["bits_per_byte_stderr"])
    one, two = (np.array([12.0]), 4, np.array([10])), (np.array([8.0, 9.0]), 4, np.array([9, 9]))
    pooled = micro_scores({"a": one, "b": two})
    assert math.isnan(pooled["loss_stderr"])  # a stratum of one window: its variance is unknown


def test_micro_pools_windows_and_macro_averages_domains():
    a = (np.array([10.0, 12.0]), 5, np.array([20, 22]))
    b = (np.array([30.0, 20.0, 25.0]), 10, np.array([30, 31, 29]))
    micro = micro_scores({"a": a, "b": b})
    assert micro["loss"] == pytest.approx((22 + 75) / (10 + 30))
    assert micro["bits_per_byte"] == pytest.approx(97 / math.log(2) / (42 + 90))
    da, db = domain_scores(*a), domain_scores(*b)
    # strata: each domain's residuals are centred within it, so micro's error is within-domain only
    assert micro["loss_stderr"] > 0
    macro = macro_scores({"a": da, "b": db})
    assert macro["loss"] == pytest.approx((da["loss"] + db["loss"]) / 2)
    assert macro["loss_stderr"] == pytest.approx(math.hypot(da["loss_stderr"], db["loss_stderr"]) / 2)
    assert macro["perplexity"] == pytest.approx(math.exp(macro["loss"]))


def test_a_loss_beyond_exps_range_has_an_infinite_perplexity():
    """A diverged model's loss above 709 nats: perplexity inf (null in the results file), the loss
    and bits per byte as they are; math.exp raised OverflowError and the evaluation was lost."""
    diverged = (np.array([800.0 * 4, 900.0 * 4]), 4, np.array([10, 12]))
    scores = domain_scores(*diverged)
    assert scores["loss"] == pytest.approx(850.0) and math.isinf(scores["perplexity"])
    assert scores["bits_per_byte"] == pytest.approx(1700 * 4 / math.log(2) / 22)
    assert math.isinf(micro_scores({"a": diverged, "b": diverged})["perplexity"])
    macro = macro_scores({"a": scores, "b": domain_scores(diverged[0] * 2, 4, diverged[2])})
    assert macro["loss"] == pytest.approx(850.0 * 1.5) and math.isinf(macro["perplexity"])
