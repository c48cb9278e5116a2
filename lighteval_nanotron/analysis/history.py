"""A run's results across training steps, as series of (step, value, standard error) per entry
and metric, read from results files or added live from each evaluation's results.

An entry is a task (`suite|task|k`), one of lighteval's group averages (`suite|name:_average|k`,
which then stands for its tasks) or the centered suite score (`suite_score`). Each series knows
whether higher is better and its chance level, from `config_tasks` where the results record them
(a group: its tasks' common direction and mean chance; the suite score: higher, chance 0; a
results file lighteval wrote: the direction of each metric in its `metrics` list), else from the
metric's name (perplexities and bits per byte: lower; chance unknown).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lighteval_nanotron.pipeline.aggregates import task_groups
from lighteval_nanotron.pipeline.result import ALL_TASKS_KEY, GROUP_MARK, SUITE_SCORE_KEY
from lighteval_nanotron.requests.held_out import WINDOWS_DIGEST
from lighteval_nanotron.tracking.paths import results_file_content, safe_relative_path, step_details_root
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
    docs: tuple[tuple[str, int | None, tuple[str | None, ...]], ...] = ()
    """Which docs the value is over: (task, its `max_samples`, the hashes of its docs' examples and
    full prompts; for a held-out entry, the digest of its windows) of its task, or of each task an
    aggregate averaged at this step; evaluations over other docs, other prompts, other windows or
    other tasks are not points of one curve."""

    def tasks(self) -> set[str]:
        return {task for task, *_ in self.docs}

    def same_docs(self, other: Point) -> bool:
        """Over the same tasks at the same `max_samples`, with the same examples and prompts where
        both record their hashes (a file without `summary_tasks` says nothing against it)."""
        if self.tasks() != other.tasks():
            return False
        theirs = {task: (samples, hashes) for task, samples, hashes in other.docs}
        for task, samples, hashes in self.docs:
            other_samples, other_hashes = theirs[task]
            if samples != other_samples or any(
                None not in (mine, its) and mine != its for mine, its in zip(hashes, other_hashes)
            ):
                return False
        return True


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
        `max_samples` changed, an aggregate over other tasks at some steps: a trend across them
        would be a difference of doc subsets or of tasks)."""
        return self._with([p for p in self.points if p.same_docs(self.points[-1])]) if self.points else self

    def _with(self, points: list[Point]) -> Series:
        return Series(self.entry, self.metric, points, self.higher_is_better, self.chance)


def guessed_direction(metric: str) -> bool:
    """Higher is better unless the name says it is a loss, a perplexity or bits per byte."""
    return not any(mark in metric for mark in LOWER_IS_BETTER_MARKS)


def recorded_directions(config: Mapping[str, Any]) -> dict[str, bool]:
    """Each metric's direction as a task's `config_tasks` entry records it: this project's
    `higher_is_better` map, or the `metrics` list of a results file lighteval wrote (each metric
    with its `metric_name` and `higher_is_better`; `ter` and `edit_distance` are lower-is-better)."""
    directions: dict[str, bool] = {}
    metrics = config.get("metrics")
    for metric in metrics if isinstance(metrics, list) else []:
        if not isinstance(metric, Mapping):
            continue
        names, direction = metric.get("metric_name"), metric.get("higher_is_better")
        for name in names if isinstance(names, list) else [names]:
            value = direction.get(name) if isinstance(direction, Mapping) else direction
            if isinstance(name, str) and isinstance(value, bool):
                directions[name] = value
    own = config.get("higher_is_better")
    if isinstance(own, Mapping):
        directions.update({name: value for name, value in own.items() if isinstance(value, bool)})
    return directions


PROMPT_HASHES = ("hash_examples", "hash_full_prompts")
"""The `summary_tasks[task].hashes` that say which docs and prompts a task's value is over."""


def prompt_hashes(content: Mapping[str, Any]) -> dict[str, tuple[str | None, ...]]:
    """`{task: (hash of its docs' examples, of their full prompts)}` as this project and lighteval
    write them (None where not recorded): the same `max_samples` over another data source (a
    shipped slice, the Hub's full split, another revision) is other docs, and other few-shot
    examples, chat template or system prompt are other prompts."""
    hashes = {}
    for task, summary in (content.get("summary_tasks") or {}).items():
        recorded = summary.get("hashes") if isinstance(summary, Mapping) else None
        recorded = recorded if isinstance(recorded, Mapping) else {}
        hashes[task] = tuple(found if isinstance(found := recorded.get(name), str) else None for name in PROMPT_HASHES)
    return hashes


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
        self.details: dict[int, list[Path]] = {}
        """step -> the per-doc details folders of the results files read at it (`load_runs`), oldest first."""
        self._directions: dict[str, dict[str, bool]] = {}
        self._chance: dict[tuple[str, int], dict[str, float]] = {}
        """(task, step) -> each metric's chance level over the docs evaluated then."""

    def add(self, step: int, content: Mapping[str, Any]) -> None:
        """One evaluation's results-file content (`EvaluationResult.to_dict()` or a file read back)."""
        for task, config in (content.get("config_tasks") or {}).items():
            if isinstance(config, Mapping):
                self._directions.setdefault(task, {}).update(recorded_directions(config))
                chance = config.get("chance")
                self._chance[(task, int(step))] = dict(chance) if isinstance(chance, Mapping) else {}
        entries = dict(content.get("results") or {})
        entries.pop(ALL_TASKS_KEY, None)
        if content.get(SUITE_SCORE_KEY):
            entries[SUITE_SCORE_KEY] = content[SUITE_SCORE_KEY]
        samples = task_max_samples(content)
        hashes = prompt_hashes(content)
        for key, digest in _window_digests(content).items():  # a held-out entry: its windows
            hashes[key] = (digest, None)
        tasks = {name: scores for name, scores in entries.items() if GROUP_MARK not in name and name != SUITE_SCORE_KEY}
        groups = task_groups(tasks)
        for entry, scores in entries.items():
            if not isinstance(scores, Mapping):
                continue
            for metric, raw in scores.items():
                value = _number(raw)
                if metric.endswith(STDERR_SUFFIX) or value is None or not math.isfinite(value):
                    continue
                if entry == SUITE_SCORE_KEY:  # the tasks with this centered metric
                    members = [name for name, found in tasks.items() if isinstance(found, Mapping) and metric in found]
                else:
                    members = groups.get(entry, []) if GROUP_MARK in entry else [entry]
                unknown = (None,) * len(PROMPT_HASHES)
                docs = tuple(sorted((member, samples.get(member), hashes.get(member, unknown)) for member in members))
                stderr = _number(scores.get(metric + STDERR_SUFFIX))
                self._put(entry, metric, Point(int(step), value, stderr, docs))

    def _put(self, entry: str, metric: str, point: Point) -> None:
        series = self.series.setdefault((entry, metric), Series(entry, metric))
        series.points = sorted([p for p in series.points if p.step != point.step] + [point], key=lambda p: p.step)
        members = sorted(series.points[-1].tasks())  # the tasks of its latest evaluation
        series.higher_is_better = self._direction(entry, metric, members)
        series.chance = self._chance_of(entry, metric, members, series.points[-1].step)

    def _direction(self, entry: str, metric: str, members: list[str]) -> bool:
        if entry == SUITE_SCORE_KEY:
            return True
        known = {self._directions.get(member, {}).get(metric) for member in members} - {None}
        return known.pop() if len(known) == 1 else guessed_direction(metric)

    def _chance_of(self, entry: str, metric: str, members: list[str], step: int) -> float | None:
        """The chance level over the docs of the evaluation at `step` (a group: its tasks' mean)."""
        if entry == SUITE_SCORE_KEY:
            return 0.0
        levels = [self._chance.get((member, step), {}).get(metric) for member in members]
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

    def metrics(self, entry: str) -> list[str]:
        return [metric for name, metric in self.series if name == entry]


def _runs_in(path: Path) -> Iterable[tuple[str, int, dict, Path]]:
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
        yield model_of(file, content, step), step, content, file


def details_folder(results_file: Path, model: str, step: int) -> Path:
    """Where the details logger wrote the per-doc details of `results_file` (`<output_dir>/results/
    <model>/<step>/results_<date>.json` -> `<output_dir>/details/<model>/<step>/<date>/`); a file in
    another layout gets a folder that does not exist (no details)."""
    depth = len(safe_relative_path(model).parts) + 2
    parents = results_file.parents
    output_dir = parents[depth] if len(parents) > depth and parents[depth - 1].name == "results" else results_file
    return step_details_root(output_dir, model, step) / results_file.stem.removeprefix("results_")


def load_runs(results_path: str | Path) -> dict[str, RunHistory]:
    """`{model name: RunHistory}` of every results file under `results_path` (an output folder, its
    `results/` folder, a model's folder or one file). Files without a training step are skipped."""
    path = Path(results_path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: pass an evaluation output folder (with results/ in it).")
    runs: dict[str, RunHistory] = {}
    for model, step, content, file in _runs_in(path):
        run = runs.setdefault(model, RunHistory(model))
        run.add(step, content)
        run.details.setdefault(step, []).append(details_folder(file, model, step))
    return runs
