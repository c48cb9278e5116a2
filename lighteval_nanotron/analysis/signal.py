"""Signal across a run, per series: trend, step-to-step noise, signal-to-noise, monotonicity,
distance from chance, and a verdict. Definitions (docs/signal.md):

- **trend**: an ordinary least-squares line through the last `window` evaluations (value against
  step); the smoothed value is that line at the latest step, `slope` its slope (per 1000 steps).
- **noise**: the spread of those evaluations around the line, sqrt(sum of squared residuals /
  (points - 2)).
- **signal-to-noise**: how far the line moves across the window, |slope| x (last step - first
  step of the window), over the noise.
- **monotonicity**: Spearman's rank correlation of score and step over the whole run, signed so
  that +1 means always improving (higher-is-better metrics as they are, the others negated).
- **distance from chance**: (smoothed value - chance) / latest standard error, signed the same way;
  where the standard error is unknown (a task of one doc), -inf: nothing shows the value above chance.
- **minimum detectable effect** (`mde`): the smallest difference from another run evaluated on the
  same docs that a two-sided 5% test detects with 80% power, (z(0.975) + z(0.8)) x sqrt(2) x the
  latest standard error (the unpaired bound: `report A B` pairs the docs, which only lowers it);
  a difference e needs about n x (mde / e)^2 docs, n the docs evaluated (`max_samples`).
- **verdict**, the first that applies: `too few evaluations` (fewer than `min_evaluations`);
  `not yet above chance` (chance known and the distance below `chance_stderrs`); `informative`
  (signal-to-noise at least `snr_threshold`); `saturated` (flat now, but the smoothed value is at
  least `snr_threshold` noises better than the mean of the run's first `window` evaluations, which
  lie before the window); `noise-dominated` otherwise.

Pure functions on `history.Series`: the same code runs in the training hook at each evaluation and
afterwards on any results folder.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from lighteval_nanotron.analysis.history import Point, Series
from lighteval_nanotron.analysis.paired import MDE80

TOO_FEW = "too few evaluations"
NOT_ABOVE_CHANCE = "not yet above chance"
NOISE_DOMINATED = "noise-dominated"
SATURATED = "saturated"
INFORMATIVE = "informative"
VERDICT_CODES = {TOO_FEW: 0, NOT_ABOVE_CHANCE: 1, NOISE_DOMINATED: 2, SATURATED: 3, INFORMATIVE: 4}
"""Verdicts as numbers, for scalar loggers (TensorBoard, W&B)."""


@dataclass(frozen=True)
class SignalSettings:
    """The knobs of the analysis (`lighteval-nanotron report --window ...`)."""

    window: int = 5
    """Evaluations the trend is fitted on (the latest ones)."""
    min_evaluations: int = 4
    """Fewer evaluations than this give the verdict `too few evaluations`."""
    snr_threshold: float = 4.0
    """Signal-to-noise from which a series is `informative`: with a 5-evaluation window, pure
    noise reaches it 5% of the time (|t| >= 3.16 with 3 degrees of freedom, docs/signal.md)."""
    chance_stderrs: float = 2.0
    """Standard errors above chance below which a series is `not yet above chance`."""

    def __post_init__(self) -> None:
        if self.window < 3:
            raise ValueError(f"window={self.window}: the trend and its noise need at least 3 evaluations.")
        if self.min_evaluations < 3:
            raise ValueError(f"min_evaluations={self.min_evaluations}: use at least 3.")
        if not (math.isfinite(self.snr_threshold) and self.snr_threshold > 0):
            raise ValueError(
                f"snr_threshold={self.snr_threshold}: use a positive finite number (at 0 or below every series is "
                f"informative, at NaN none is; the default, {type(self).snr_threshold:g}: docs/signal.md)."
            )
        if not (math.isfinite(self.chance_stderrs) and self.chance_stderrs >= 0):
            raise ValueError(
                f"chance_stderrs={self.chance_stderrs}: use a finite number >= 0 (the default: "
                f"{type(self).chance_stderrs:g})."
            )


DEFAULT_SETTINGS = SignalSettings()


@dataclass(frozen=True)
class SeriesSignal:
    """The analysis of one series at its latest evaluation (None where undefined)."""

    evaluations: int
    step: int
    value: float
    stderr: float | None
    trend: float
    slope_per_1k_steps: float | None
    noise: float | None
    snr: float | None
    monotonicity: float | None
    chance: float | None
    chance_distance: float | None
    verdict: str
    mde: float | None

    @property
    def verdict_code(self) -> int:
        return VERDICT_CODES[self.verdict]

    def trend_at(self, step: int) -> float:
        """The trend line at `step` (the smoothed value moved along the slope; the value itself
        before there is a line)."""
        if self.slope_per_1k_steps is None:
            return self.trend
        return self.trend + self.slope_per_1k_steps / 1000.0 * (step - self.step)

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict_code": self.verdict_code}


@dataclass(frozen=True)
class Trend:
    """The line fitted on a window: its value at the window's last step, slope, noise, rise."""

    value: float
    slope: float
    noise: float
    rise: float


def fit_trend(points: list[Point]) -> Trend:
    """OLS line through `points` (at least 3, distinct steps)."""
    steps = np.array([p.step for p in points], dtype=np.float64)
    values = np.array([p.value for p in points], dtype=np.float64)
    line = stats.linregress(steps, values)
    residuals = values - (line.intercept + line.slope * steps)
    noise = math.sqrt(float(np.sum(residuals**2)) / (len(points) - 2))
    return Trend(
        value=float(line.intercept + line.slope * steps[-1]),
        slope=float(line.slope),
        noise=noise,
        rise=float(line.slope * (steps[-1] - steps[0])),
    )


def _ratio(numerator: float, denominator: float) -> float:
    if denominator > 0:
        return numerator / denominator
    return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)


def monotonicity(points: list[Point], higher_is_better: bool) -> float | None:
    """Spearman's rho of value and step, +1 = always improving; None for fewer than 3 points or a
    constant series."""
    if len(points) < 3:
        return None
    values = [p.value if higher_is_better else -p.value for p in points]
    if len(set(values)) == 1:
        return None
    rho = stats.spearmanr([p.step for p in points], values).statistic
    return None if math.isnan(rho) else float(rho)


def analyze(series: Series, settings: SignalSettings = DEFAULT_SETTINGS) -> SeriesSignal:
    """The signal quantities and verdict of `series` at its latest evaluation."""
    if not series.points:
        raise ValueError(f"Series {series.entry} / {series.metric} has no evaluation.")
    points = series.over_latest_docs().points
    last = points[-1]
    sign = 1.0 if series.higher_is_better else -1.0
    trend = fit_trend(points[-settings.window :]) if len(points) >= 3 else None
    smoothed = trend.value if trend is not None else last.value
    distance = None
    if series.chance is not None and last.stderr is not None and math.isfinite(last.stderr):
        distance = _ratio(sign * (smoothed - series.chance), last.stderr)
    elif series.chance is not None:  # no standard error (one doc): nothing shows it above chance
        distance = -math.inf
    snr = _ratio(abs(trend.rise), trend.noise) if trend is not None else None
    verdict = _verdict(points, sign, trend, snr, distance, settings)
    return SeriesSignal(
        evaluations=len(points),
        step=last.step,
        value=last.value,
        stderr=last.stderr,
        trend=smoothed,
        slope_per_1k_steps=None if trend is None else trend.slope * 1000.0,
        noise=None if trend is None else trend.noise,
        snr=snr,
        monotonicity=monotonicity(points, series.higher_is_better),
        chance=series.chance,
        chance_distance=distance,
        verdict=verdict,
        mde=MDE80 * math.sqrt(2) * last.stderr if last.stderr is not None and math.isfinite(last.stderr) else None,
    )


def _verdict(
    points: list[Point],
    sign: float,
    trend: Trend | None,
    snr: float | None,
    distance: float | None,
    settings: SignalSettings,
) -> str:
    if len(points) < settings.min_evaluations or trend is None or snr is None:
        return TOO_FEW
    if distance is not None and distance < settings.chance_stderrs:
        return NOT_ABOVE_CHANCE
    if snr >= settings.snr_threshold:
        return INFORMATIVE
    early = points[: min(settings.window, len(points) - settings.window)]
    if len(early) >= 2:
        gain = sign * (trend.value - sum(p.value for p in early) / len(early))
        if _ratio(gain, trend.noise) >= settings.snr_threshold:
            return SATURATED
    return NOISE_DOMINATED


def trend_curve(series: Series, settings: SignalSettings = DEFAULT_SETTINGS) -> list[tuple[int, float, float | None]]:
    """(step, smoothed value, noise) at every evaluation, as the hook computed them then: the line
    through the window ending there (the raw value and no noise before 3 evaluations)."""
    curve = []
    for point in series.points:
        window = series.up_to(point.step).over_latest_docs().points[-settings.window :]
        if len(window) < 3:
            curve.append((point.step, point.value, None))
        else:
            trend = fit_trend(window)
            curve.append((point.step, trend.value, trend.noise))
    return curve
