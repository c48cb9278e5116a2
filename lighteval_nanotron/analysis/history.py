"""A run's results across training steps, as series of (step, value, standard error) per entry
and metric, read from results files or added live from each evaluation's results.

An entry is a task (`suite|task|k`), one of lighteval's group averages (`suite|name:_average|k`,
which then stands for its tasks) or the centered suite score (`suite_score`). Each series knows
whether higher is better and its chance level, from `config_tasks` where the results record them
(a group: its tasks' common direction and mean chance; the suite score: higher, chance 0), else
from the metric's name (perplexities and bits per byte: lower; chance unknown).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lighteval_nanotron.metrics.chance import CENTERED_SUFFIX
from lighteval_nanotron.pipeline.aggregates import task_groups
from lighteval_nanotron.pipeline.result import ALL_TASKS_KEY, GROUP_MARK, SUITE_SCORE_KEY
from lighteval_nanotron.requests.held_out import WINDOWS_DIGEST
from lighteval_nanotron.tracking.paths import results_file_content
from lighteval_nanotron.tracking.plot import model_of, step_of
from lighteval_nanotron.tracking.results_file import task_max_samples

logger = logging.getLogger(__name__)

STDERR_SUFFIX = "_stderr"
LOWER_IS_BETTER_MARKS = ("ppl", "perplexity", "bpb", "bits_per_byte", "loss", "nll")


@dataclass(frozen=True)
class Point:
    step: int
    value: float
    stderr: float | None
    docs: tuple[int | str | None, ...] = ()
    """Which docs the value is over: the `max_samples` of its task, or of its tasks for an aggregate
    (distinct values, sorted); for held-out entries, the digest of their windows. Evaluations over
    other docs are not points of one curve."""


@dataclass
class Series:
    """One entry's metric across the run's evaluations, sorted by step (one point per step)."""

    entry: str
    metric: str
    points: list[Point] = field(default_factory=list)
    higher_is_better: bool = True
    chance: float | None = None

    def up_to(self, step: int) -> Series:
        """The same series with only the evaluations at or before `step`."""
        return self._with([p for p in self.points if p.step <= step])

    def over_latest_docs(self) -> Series:
        """The same series with only the evaluations over the docs of the latest one (a run whose
        `max_samples` changed: a trend across other doc subsets would be a difference of subsets)."""
        return self._with([p for p in self.points if p.docs == self.points[-1].docs]) if self.points else self

    def _with(self, points: list[Point]) -> Series:
        return Series(self.entry, self.metric, points, self.higher_is_better, self.chance)


def guessed_direction(metric: str) -> bool:
    """Higher is better unless the name says it is a loss, a perplexity or bits per byte."""
    return not any(mark in metric for mark in LOWER_IS_BETTER_MARKS)


def _window_digests(content: Mapping[str, Any]) -> dict[str, str]:
    """`{heldout|<name>: digest}` of the held-out entries whose `config_tasks` record their windows."""
    configs = content.get("config_tasks") or {}
    return {
        key: config[WINDOWS_DIGEST]
        for key, config in configs.items()
        if isinstance(config, Mapping) and isinstance(config.get(WINDOWS_DIGEST), str)
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class RunHistory:
    """The series of one run (one model name), filled file by file or evaluation by evaluation."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.series: dict[tuple[str, str], Series] = {}
        self._directions: dict[str, dict[str, bool]] = {}
        self._chance: dict[str, dict[str, float]] = {}

    def add(self, step: int, content: Mapping[str, Any]) -> None:
        """One evaluation's results-file content (`EvaluationResult.to_dict()` or a file read back)."""
        for task, config in (content.get("config_tasks") or {}).items():
            if isinstance(config, Mapping):
                self._directions.setdefault(task, {}).update(config.get("higher_is_better") or {})
                self._chance.setdefault(task, {}).update(config.get("chance") or {})
        entries = dict(content.get("results") or {})
        entries.pop(ALL_TASKS_KEY, None)
        if content.get(SUITE_SCORE_KEY):
            entries[SUITE_SCORE_KEY] = content[SUITE_SCORE_KEY]
        samples = task_max_samples(content)
        every = tuple(sorted(set(samples.values()), key=lambda n: -1 if n is None else n))
        windows = _window_digests(content)
        for entry, scores in entries.items():
            if not isinstance(scores, Mapping):
                continue
            docs = (samples[entry],) if entry in samples else every
            if entry in windows:
                docs = (windows[entry],)
            for metric, raw in scores.items():
                value = _number(raw)
                if metric.endswith(STDERR_SUFFIX) or value is None or not math.isfinite(value):
                    continue
                stderr = _number(scores.get(metric + STDERR_SUFFIX))
                self._put(entry, metric, Point(int(step), value, stderr, docs))

    def _put(self, entry: str, metric: str, point: Point) -> None:
        series = self.series.setdefault((entry, metric), Series(entry, metric))
        series.points = sorted([p for p in series.points if p.step != point.step] + [point], key=lambda p: p.step)
        series.higher_is_better = self._direction(entry, metric)
        series.chance = self._chance_of(entry, metric)

    def _members(self, entry: str) -> list[str]:
        if GROUP_MARK not in entry:
            return [entry]
        tasks = {name for name, _ in self.series if GROUP_MARK not in name and name != SUITE_SCORE_KEY}
        return task_groups(sorted(tasks)).get(entry, [])

    def _direction(self, entry: str, metric: str) -> bool:
        if entry == SUITE_SCORE_KEY:
            return True
        known = {self._directions.get(member, {}).get(metric) for member in self._members(entry)} - {None}
        return known.pop() if len(known) == 1 else guessed_direction(metric)

    def _chance_of(self, entry: str, metric: str) -> float | None:
        if entry == SUITE_SCORE_KEY:
            return 0.0
        levels = [self._chance.get(member, {}).get(metric) for member in self._members(entry)]
        if not levels or any(level is None for level in levels):
            return None
        return sum(levels) / len(levels)

    def entries(self) -> list[str]:
        """Entries in first-seen order, each of lighteval's group averages in the place of its first
        task and standing for its tasks (which are left out), the suite score last."""
        names = list(dict.fromkeys(entry for entry, _ in self.series))
        groups = task_groups([n for n in names if GROUP_MARK not in n and n != SUITE_SCORE_KEY])
        group_of = {member: key for key, members in groups.items() for member in members if key in names}
        ordered = [group_of.get(n, n) for n in names if GROUP_MARK not in n and n != SUITE_SCORE_KEY]
        ordered += [n for n in names if GROUP_MARK in n and n not in ordered]
        return list(dict.fromkeys(ordered)) + ([SUITE_SCORE_KEY] if SUITE_SCORE_KEY in names else [])

    def members_at(self, entry: str, step: int) -> set[str]:
        """The tasks an aggregate entry stands for at `step`: a group's tasks, or for the suite score
        the tasks with a centered metric; a task stands for itself."""
        if entry == SUITE_SCORE_KEY:
            candidates = {name for name, metric in self.series if metric.endswith(CENTERED_SUFFIX)}
        else:
            candidates = set(self._members(entry))
        evaluated = {name for (name, _), series in self.series.items() if any(p.step == step for p in series.points)}
        return {name for name in candidates & evaluated if name != SUITE_SCORE_KEY and GROUP_MARK not in name}

    def metrics(self, entry: str) -> list[str]:
        return [metric for name, metric in self.series if name == entry]


def _runs_in(path: Path) -> Iterable[tuple[str, int, dict]]:
    files = [path] if path.is_file() else sorted(path.rglob("results_*.json"))
    for file in files:
        content, problem = results_file_content(file)
        if content is None:
            logger.warning("Skipping %s: not a readable results file (%s)", file, problem)
            continue
        step = step_of(file, content)
        if step is None:
            logger.warning("Skipping %s: it records no training step", file)
            continue
        yield model_of(file, content, step), step, content


def load_runs(results_path: str | Path) -> dict[str, RunHistory]:
    """`{model name: RunHistory}` of every results file under `results_path` (an output folder, its
    `results/` folder, a model's folder or one file). Files without a training step are skipped."""
    path = Path(results_path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: pass an evaluation output folder (with results/ in it).")
    runs: dict[str, RunHistory] = {}
    for model, step, content in _runs_in(path):
        runs.setdefault(model, RunHistory(model)).add(step, content)
    return runs
