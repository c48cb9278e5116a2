"""Signal quantities and verdicts on synthetic histories whose answers are known."""

import math

import numpy as np
import pytest

from lighteval_nanotron.analysis import Series, SignalSettings, analyze, trend_curve
from lighteval_nanotron.analysis.history import Point
from lighteval_nanotron.analysis.signal import (
    INFORMATIVE,
    NOISE_DOMINATED,
    NOT_ABOVE_CHANCE,
    SATURATED,
    TOO_FEW,
    fit_trend,
    monotonicity,
)

STEPS = list(range(0, 2100, 100))  # 21 evaluations
STDERR = 0.02  # the per-evaluation standard error of a 500-doc accuracy around 0.5


def series(values, higher_is_better=True, chance=None, stderr=STDERR, steps=STEPS):
    points = [Point(step, float(value), stderr) for step, value in zip(steps, values)]
    return Series("custom|t|0", "acc" if higher_is_better else "gold_bpb", points, higher_is_better, chance)


def noise(seed, scale):
    return np.random.default_rng(seed).normal(0.0, scale, size=len(STEPS))


def test_exact_line_by_hand():
    # y = 0.3 + 0.0002 * step: the last 5 points 1600..2000 lie on it, no residual
    result = analyze(series([0.3 + 0.0002 * s for s in STEPS], chance=0.25))
    assert result.trend == pytest.approx(0.7)
    assert result.slope_per_1k_steps == pytest.approx(0.2)
    assert result.noise == pytest.approx(0.0, abs=1e-12)
    assert result.snr > 1e6  # no residual: as good as infinite
    assert result.monotonicity == pytest.approx(1.0)
    assert result.chance_distance == pytest.approx((0.7 - 0.25) / STDERR)
    assert result.verdict == INFORMATIVE and result.verdict_code == 4


def test_trend_noise_and_snr_by_hand():
    # window of 3: steps 0, 1, 2 (x1000 so the slope per 1k steps is the slope per unit), values 0, 2, 1
    points = [Point(0, 0.0, 0.1), Point(1000, 2.0, 0.1), Point(2000, 1.0, 0.1)]
    trend = fit_trend(points)
    # OLS: slope = 0.5 per 1000 steps, intercept 0.5 -> value at 2000 = 1.5; residuals -0.5, 1, -0.5
    assert trend.slope * 1000 == pytest.approx(0.5)
    assert trend.value == pytest.approx(1.5)
    assert trend.noise == pytest.approx(math.sqrt(0.25 + 1 + 0.25))  # / (3 - 2)
    assert trend.rise == pytest.approx(1.0)
    result = analyze(Series("t", "m", points, True, None), SignalSettings(window=3, min_evaluations=3))
    assert result.snr == pytest.approx(1.0 / math.sqrt(1.5))
    assert result.monotonicity == pytest.approx(0.5)  # ranks (1, 2, 3) vs (1, 3, 2)


def test_pure_trend_is_informative():
    values = np.linspace(0.3, 0.7, len(STEPS)) + noise(1, 0.005)
    result = analyze(series(values, chance=0.25))
    assert result.verdict == INFORMATIVE
    assert result.snr > 4
    assert result.monotonicity > 0.95
    assert result.noise == pytest.approx(0.005, rel=0.8)


def test_an_unknown_standard_error_never_shows_a_value_above_chance():
    """One doc per evaluation: the standard error is NaN, so nothing measures the distance from
    chance; the verdict says not yet above chance instead of skipping the check (a 1-doc task's
    0/1 accuracies could otherwise read as an informative trend)."""
    values = np.linspace(0.3, 0.7, len(STEPS)) + noise(1, 0.005)
    result = analyze(series(values, chance=0.25, stderr=float("nan")))
    assert result.verdict == NOT_ABOVE_CHANCE and result.chance_distance == -math.inf
    assert analyze(series(values, chance=None, stderr=float("nan"))).verdict == INFORMATIVE  # no chance level


def test_minimum_detectable_effect_of_a_difference_from_another_run():
    """(z(0.975) + z(0.8)) x sqrt(2) x the latest standard error; none without one."""
    values = np.linspace(0.3, 0.7, len(STEPS))
    assert analyze(series(values)).mde == pytest.approx(2.8016 * math.sqrt(2) * STDERR, rel=1e-4)
    assert analyze(series(values, stderr=float("nan"))).mde is None


def test_pure_trend_of_a_lower_is_better_metric():
    values = np.linspace(3.0, 2.0, len(STEPS)) + noise(2, 0.01)  # bits per byte falling
    result = analyze(series(values, higher_is_better=False))
    assert result.verdict == INFORMATIVE
    assert result.monotonicity > 0.95  # +1 = always improving, whatever the direction
    assert result.slope_per_1k_steps == pytest.approx(-0.5, rel=0.3)
    assert result.chance_distance is None


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_pure_noise_is_noise_dominated(seed):
    values = 0.5 + noise(seed, 0.02)
    result = analyze(series(values, chance=0.25))
    assert result.chance_distance > 2  # far above chance: it is the noise that decides
    assert result.verdict == NOISE_DOMINATED
    assert abs(result.monotonicity) < 0.5


def test_pure_noise_at_chance_is_not_yet_above_chance():
    result = analyze(series(0.25 + noise(6, 0.01), chance=0.25))
    assert result.verdict == NOT_ABOVE_CHANCE
    assert abs(result.chance_distance) < 2


def test_saturated_curve():
    values = [0.8 - 0.5 * math.exp(-s / 200) for s in STEPS] + noise(7, 0.003)
    result = analyze(series(values, chance=0.25))
    assert result.verdict == SATURATED
    assert result.snr < 4
    assert result.trend == pytest.approx(0.8, abs=0.01)
    assert result.monotonicity > 0.5  # it did rise


def test_late_riser():
    values = [0.25 if s <= 1500 else 0.25 + 0.0007 * (s - 1500) for s in STEPS] + noise(8, 0.005)
    before = series(values).up_to(1400)
    before.chance = 0.25
    assert analyze(before).verdict == NOT_ABOVE_CHANCE  # flat at chance so far
    result = analyze(series(values, chance=0.25))
    assert result.verdict == INFORMATIVE  # the window sees the rise
    assert result.trend == pytest.approx(0.6, abs=0.03)


def test_too_few_evaluations():
    result = analyze(series([0.3, 0.5, 0.7], chance=0.25))
    assert result.verdict == TOO_FEW
    assert result.trend == pytest.approx(0.7)  # the line through 3 points exists, the verdict waits
    one = analyze(series([0.3]))
    assert (one.trend, one.noise, one.snr, one.monotonicity, one.verdict) == (0.3, None, None, None, TOO_FEW)


def test_monotonicity_of_a_constant_series_is_undefined():
    points = [Point(s, 0.5, 0.01) for s in (0, 1, 2, 3)]
    assert monotonicity(points, True) is None


def test_trend_curve_is_what_each_evaluation_saw():
    s = series([0.3 + 0.0002 * step for step in STEPS])
    curve = trend_curve(s)
    assert [step for step, _, _ in curve] == STEPS
    assert curve[0] == (0, 0.3, None) and curve[1][2] is None  # fewer than 3 points: the value itself
    for step, value, spread in curve[2:]:
        assert value == pytest.approx(0.3 + 0.0002 * step) and spread == pytest.approx(0.0, abs=1e-12)
    assert curve[-1][1] == pytest.approx(analyze(s).trend)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="at least 3"):
        SignalSettings(window=2)
    for threshold in (0.0, -1.0, math.nan, math.inf):  # 0 or -1 made every series informative, NaN none
        with pytest.raises(ValueError, match="snr_threshold=.*positive finite"):
            SignalSettings(snr_threshold=threshold)
    with pytest.raises(ValueError, match="chance_stderrs=nan"):
        SignalSettings(chance_stderrs=math.nan)
