"""Is run A ahead of run B beyond the noise? Per entry and metric, at the last step both reached.

Each run's series is cut at the common step (the earlier of the two runs' last evaluations) and
analyzed there (`signal.analyze`); both trend lines are read at that step (a run not evaluated at
it: its line moved on from its last evaluation before it, less than one of its intervals, so
that one run is not compared at an earlier step of training than the other). A run is ahead when
its smoothed value is better than the other's by more than `separation` times their combined
noise, sqrt(noise_A^2 + noise_B^2) (SIGNAL.md: two runs differ when their smoothed values differ
by more than the combined noise).
A group average or suite score is compared only when both runs have it over the same tasks there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.signal import DEFAULT_SETTINGS, SeriesSignal, SignalSettings, analyze

SEPARATION = 2.0
"""Combined noises by which smoothed values must differ for one run to be ahead."""
DIFFERENT_TASKS = "not comparable: other tasks"
"""The note of an aggregate (a group average, the suite score) over other tasks in each run."""
DIFFERENT_DOCS = "not comparable: other docs or prompts"
"""The note of an entry evaluated over other docs (another `max_samples` or data source) or other
prompts (few-shot examples, chat template, system prompt) in each run."""


@dataclass(frozen=True)
class Comparison:
    """Two runs on one entry and metric at `step`; `leader` is None within the noise."""

    entry: str
    metric: str
    run_a: str
    run_b: str
    step: int
    a: SeriesSignal
    b: SeriesSignal
    difference: float | None
    """Smoothed A - smoothed B at `step`, signed so that > 0 means A is better (None: not comparable)."""
    combined_noise: float | None
    leader: str | None
    note: str

    @property
    def separations(self) -> float | None:
        """|difference| / combined noise."""
        if self.difference is None or not self.combined_noise:
            return None
        return abs(self.difference) / self.combined_noise


def compare_series(
    run_a: RunHistory, run_b: RunHistory, entry: str, metric: str, settings: SignalSettings = DEFAULT_SETTINGS
) -> Comparison | None:
    """The comparison of one entry and metric present in both runs (None if either lacks it)."""
    series_a, series_b = run_a.series.get((entry, metric)), run_b.series.get((entry, metric))
    if series_a is None or series_b is None:
        return None
    step = min(series_a.points[-1].step, series_b.points[-1].step)
    cut_a, cut_b = series_a.up_to(step), series_b.up_to(step)
    if not cut_a.points or not cut_b.points:
        return None
    a, b = analyze(cut_a, settings), analyze(cut_b, settings)
    last_a, last_b = cut_a.points[-1], cut_b.points[-1]
    if last_a.tasks() != last_b.tasks():  # a group or suite score of other tasks
        return Comparison(entry, metric, run_a.name, run_b.name, step, a, b, None, None, None, DIFFERENT_TASKS)
    if not last_a.same_docs(last_b):  # another max_samples, data source or prompts
        return Comparison(entry, metric, run_a.name, run_b.name, step, a, b, None, None, None, DIFFERENT_DOCS)
    sign = 1.0 if series_a.higher_is_better else -1.0
    difference = sign * (a.trend_at(step) - b.trend_at(step))
    if a.noise is None or b.noise is None or min(a.evaluations, b.evaluations) < settings.min_evaluations:
        return Comparison(
            entry, metric, run_a.name, run_b.name, step, a, b, difference, None, None, "too few evaluations"
        )
    combined = math.sqrt(a.noise**2 + b.noise**2)
    leader = None
    if abs(difference) > SEPARATION * combined:
        leader = run_a.name if difference > 0 else run_b.name
    note = f"{leader} ahead" if leader else "within noise"
    return Comparison(entry, metric, run_a.name, run_b.name, step, a, b, difference, combined, leader, note)


def compare_runs(runs: list[RunHistory], settings: SignalSettings = DEFAULT_SETTINGS) -> list[Comparison]:
    """Every pair of runs on every entry and metric they share, in the first run's order."""
    comparisons = []
    for run_a, run_b in combinations(runs, 2):
        for entry in run_a.entries():
            for metric in run_a.metrics(entry):
                found = compare_series(run_a, run_b, entry, metric, settings)
                if found is not None:
                    comparisons.append(found)
    return comparisons
