"""Aggregates over tasks: lighteval's group averages, the `all` row and the centered suite score.

- **Group averages**, as lighteval's results logger writes them: the tasks `suite|name:sub|k` that
  share `suite`, the part of `name` before `:` and `k` (at least two of them) get an entry
  `suite|name:_average|k` holding the plain mean of each metric of the first of them
  (`leaderboard|mmlu:_average|5` over the 57 subjects). The values equal lighteval's; the standard
  error is that of the mean of independent tasks, sqrt(sum of squared standard errors) / k
  (lighteval averages the standard errors, about sqrt(k) times too large), as in `all`.
- **`all`**: every metric averaged over the tasks (not over the group entries), as lighteval does.
- **Suite score**: for every centered metric (`*_centered`, see `metrics.chance`), the mean over
  the suite's benchmarks, a group counting once (the mean of its tasks) like any single task
  (DCLM's CORE: the mean of centered accuracies), with the standard error of that mean.

A task that failed at the step (`failed`) leaves out every aggregate it belongs to: its group's
average, `all` and the suite score (it may have been one of its benchmarks). A mean over the other
tasks printed under the aggregate's name would be another quantity, and a curve or comparison
through it would measure the change of tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from lighteval_nanotron.metrics import average_over_tasks
from lighteval_nanotron.metrics.chance import CENTERED_SUFFIX
from lighteval_nanotron.pipeline.result import ALL_TASKS_KEY, GROUP_MARK
from lighteval_nanotron.requests.held_out import is_held_out_key

STDERR_SUFFIX = "_stderr"

Results = Mapping[str, Mapping[str, float]]


def group_key(task_name: str) -> str | None:
    """lighteval's group entry for a `suite|task|k` key, or for a `task|k` key as lighteval 0.12.1
    and later name tasks in their results files (None for any other key, held-out domains too)."""
    parts = task_name.split("|")
    if len(parts) not in (2, 3) or GROUP_MARK in task_name or is_held_out_key(task_name):
        return None
    *suite, task, fewshot = parts
    return "|".join([*suite, f"{task.split(':')[0]}:_average", fewshot])


def is_aggregate_key(name: str) -> bool:
    """`all` or a group entry: written from the tasks, never a task itself."""
    return name == ALL_TASKS_KEY or GROUP_MARK in name


def task_groups(task_names: Iterable[str]) -> dict[str, list[str]]:
    """`{group key: its tasks}` for the groups of two or more tasks, in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for name in task_names:
        key = group_key(name)
        if key is not None:
            groups.setdefault(key, []).append(name)
    return {key: members for key, members in groups.items() if len(members) > 1}


def _mean_with_stderr(name: str, entries: list[Mapping[str, float]]) -> float:
    values = [float(entry[name]) for entry in entries]
    if name.endswith(STDERR_SUFFIX):
        return math.sqrt(sum(v * v for v in values)) / len(values)
    return sum(values) / len(values)


def group_averages(task_results: Results) -> dict[str, dict[str, float]]:
    """lighteval's `suite|name:_average|k` entries over `task_results` (tasks only)."""
    averages: dict[str, dict[str, float]] = {}
    for key, members in task_groups(task_results).items():
        entries = [task_results[member] for member in members]
        # lighteval reads the first task's metrics (a task lacking one would count as 0 there;
        # here such a metric is left out of the group rather than averaged with a made-up 0)
        names = [name for name in entries[0] if all(name in entry for entry in entries)]
        averages[key] = {name: _mean_with_stderr(name, entries) for name in names}
    return averages


def failed_benchmark_tasks(failed: Iterable[str]) -> list[str]:
    """The failed tasks an aggregate could have averaged (held-out domains are in none)."""
    return [name for name in failed if not is_held_out_key(name) and not is_aggregate_key(name)]


def with_aggregates(task_results: Results, failed: Iterable[str] = ()) -> dict[str, dict[str, float]]:
    """The `results` section: the tasks, then lighteval's group averages, then `all`; none of the
    aggregates a task of `failed` belongs to."""
    tasks = {name: dict(scores) for name, scores in task_results.items() if not is_aggregate_key(name)}
    missing = failed_benchmark_tasks(failed)
    incomplete = {group_key(name) for name in missing}
    groups = {key: scores for key, scores in group_averages(tasks).items() if key not in incomplete}
    return {**tasks, **groups, **({} if missing else {ALL_TASKS_KEY: average_over_tasks(tasks)})}


def _units(task_results: Results) -> list[list[str]]:
    """Benchmarks of the suite score: each group's tasks together, every other task alone."""
    grouped = task_groups(task_results)
    member_of = {member: key for key, members in grouped.items() for member in members}
    units: dict[str, list[str]] = {}
    for name in task_results:
        units.setdefault(member_of.get(name, name), []).append(name)
    return list(units.values())


def suite_score(task_results: Results, failed: Iterable[str] = ()) -> dict[str, float]:
    """`{m_centered: score, m_centered_stderr: error}` for every centered metric of the tasks;
    nothing when a task of `failed` could have been one of the suite's benchmarks."""
    if failed_benchmark_tasks(failed):
        return {}
    tasks = {name: scores for name, scores in task_results.items() if not is_aggregate_key(name)}
    names = list(dict.fromkeys(n for s in tasks.values() for n in s if n.endswith(CENTERED_SUFFIX)))
    score: dict[str, float] = {}
    for name in names:
        unit_values, unit_errors = [], []
        for unit in _units(tasks):
            members = [tasks[task] for task in unit if name in tasks[task]]
            if not members:
                continue
            unit_values.append(sum(float(m[name]) for m in members) / len(members))
            errors = [float(m.get(name + STDERR_SUFFIX, math.nan)) for m in members]
            unit_errors.append(math.sqrt(sum(e * e for e in errors)) / len(members))
        score[name] = sum(unit_values) / len(unit_values)
        score[name + STDERR_SUFFIX] = math.sqrt(sum(e * e for e in unit_errors)) / len(unit_errors)
    return score
