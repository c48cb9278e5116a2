"""The content of one step's results file: strict JSON, merged with what an earlier run wrote.

A step is evaluated per (task with its few-shot count, max_samples): a later run with other tasks
adds them to the step's file, and a task evaluated again replaces only its own entries; a run
whose settings that change scores (`SCORE_SETTINGS`: the weights' fingerprint, dtype, chat
template, system prompt, generation parameters) differ from the kept tasks' is refused
(`settings_conflict`). The
aggregates (`all`, lighteval's group averages, the suite score) and `summary_general` are
recomputed over the merged tasks. Non-finite numbers (a NaN standard error of a
one-doc task, say) are written as `null` and listed under `config_general.non_finite_values`, so
strict JSON parsers read the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from lighteval_nanotron.errors import TrackingError
from lighteval_nanotron.pipeline.aggregates import is_aggregate_key, suite_score, with_aggregates
from lighteval_nanotron.pipeline.result import (
    ALL_TASKS_KEY,
    GENERATION_KEY,
    GENERATIVE_KEY,
    SIGNAL_KEY,
    SUITE_SCORE_KEY,
    TASK_COSTS_KEY,
    VERSION_KEY,
    WEIGHTS_KEY,
)
from lighteval_nanotron.pipeline.summary import general_summary
from lighteval_nanotron.requests.held_out import WINDOWS_DIGEST

PER_TASK_SECTIONS = ("results", "versions", "config_tasks", "summary_tasks", TASK_COSTS_KEY)
MAX_SAMPLES_BY_TASK = "max_samples_by_task"
NON_FINITE_KEY = "non_finite_values"
FAILED_TASKS_KEY = "failed_tasks"
FLOAT16 = "float16"
"""The one evaluation dtype that changes a checkpoint's weights' fingerprint (`models.weights_fingerprint`
rounds to bfloat16; float16 flushes or rounds the smallest bfloat16 and float32 values first)."""
SCORE_SETTINGS = (WEIGHTS_KEY, "dtype", "use_chat_template", "system_prompt", "chat_template_sha256", GENERATION_KEY)
"""`config_general` keys whose value changes a task's scores: a step's file holds one value of each
(the generation parameters: recorded by a run that generates, compared where a kept task generates;
the weights: two checkpoints under one model name and step are two models)."""


_SECTIONS = ("config_general", *PER_TASK_SECTIONS, "summary_general", FAILED_TASKS_KEY)
_COUNTS = ("truncated", "non_truncated", "padded", "non_padded", "num_samples")


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def results_file_problem(content: Any) -> str | None:
    """Why `content` (a parsed results file) is not a results dict this package can read and merge
    into, or None when it is: every section an object, every score a number (or null), every
    task's `max_samples` an integer (or null), every summary count an integer."""
    if not isinstance(content, dict):
        return f"it holds a JSON {type(content).__name__}, not an object"
    for section in _SECTIONS:
        if content.get(section) is not None and not isinstance(content[section], dict):
            return f"its {section!r} is a JSON {type(content[section]).__name__}, not an object"
    for task, scores in (content.get("results") or {}).items():
        if not isinstance(scores, dict):
            return f"results[{task!r}] is not an object of scores"
        wrong = next((metric for metric, value in scores.items() if not _is_number(value)), None)
        if wrong is not None:
            return f"results[{task!r}][{wrong!r}] is {scores[wrong]!r}, not a number"
    by_task = (content.get("config_general") or {}).get(MAX_SAMPLES_BY_TASK)
    if by_task is not None and (
        not isinstance(by_task, dict) or not all(isinstance(n, int) or n is None for n in by_task.values())
    ):
        return f"config_general.{MAX_SAMPLES_BY_TASK} is not an object of integers"
    for task, summary in (content.get("summary_tasks") or {}).items():
        if not isinstance(summary, dict) or not all(_is_number(summary.get(key)) for key in _COUNTS):
            return f"summary_tasks[{task!r}] is not an object of counts"
    return None


def task_max_samples(content: dict[str, Any]) -> dict[str, int | None]:
    """`{task: max_samples}` of a results file (files without the per-task record: the run's)."""
    general = content.get("config_general") or {}
    recorded = general.get(MAX_SAMPLES_BY_TASK)
    if isinstance(recorded, dict):
        return dict(recorded)
    return {name: general.get("max_samples") for name in evaluated_names(content)}


def evaluated_tasks(content: dict[str, Any]) -> dict[tuple[str, int | None], str | None]:
    """The (task, max_samples) pairs a results file holds results for, each with the digest of the
    windows it was scored on (`config_tasks[task].windows_sha256`: held-out domains; None for tasks
    and for files written before domains recorded one)."""
    results = content.get("results") or {}
    described = content.get("config_tasks") or {}
    return {
        (task, samples): _windows_digest(described.get(task))
        for task, samples in task_max_samples(content).items()
        if task in results
    }


def _windows_digest(described: Any) -> str | None:
    digest = described.get(WINDOWS_DIGEST) if isinstance(described, dict) else None
    return digest if isinstance(digest, str) else None


def settings_conflict(earlier: dict[str, Any], settings: dict[str, Any], evaluated: Iterable[str]) -> str | None:
    """Why a run with `settings` (its `config_general`, or the `SCORE_SETTINGS` it will record)
    that evaluates the tasks `evaluated` cannot be merged into `earlier` (a step's results file of
    this package): it would keep tasks of `earlier` that were scored with another value of a
    setting both record, under the run's `config_general`. None when it can."""
    kept = sorted(task for task in evaluated_names(earlier) if task not in set(evaluated))
    differing = differing_settings(earlier, settings, kept)
    if not kept or not differing:
        return None
    if differing[0].startswith(WEIGHTS_KEY):
        there, now = (earlier.get("config_general") or {}).get("dtype"), settings.get("dtype")
        if FLOAT16 in (there, now) and there != now:  # float16 rounds a checkpoint's smallest values
            return (
                f"the step's results file holds {', '.join(kept)} measured on other weights ({'; '.join(differing)}), "
                f"and one evaluation ran in {FLOAT16} (dtype {there or 'not recorded'} there, {now or 'not recorded'} "
                f"now): {FLOAT16} rounds a checkpoint's smallest values, so the same checkpoint is other weights in it "
                "(and scores otherwise). Evaluate in the dtype those tasks were scored in (`--dtype`), add those tasks "
                "to this run to score them again, or write to another output folder (or model name)."
            )
        return (
            f"the step's results file holds {', '.join(kept)} measured on other weights ({'; '.join(differing)}): "
            "another checkpoint (another run, or a copy of another step) evaluated under this model name and step. "
            "Give this checkpoint another model name (`model_name`, `--model-name`) or output folder, "
            "or add those tasks to this run to score them again on these weights."
        )
    return (
        f"the step's results file holds {', '.join(kept)} scored with other settings ({'; '.join(differing)}): "
        "one step's file describes one set of settings. Evaluate with the same settings, add those tasks to this "
        "run to score them again, or write to another output folder (or model name)."
    )


def differing_settings(earlier: dict[str, Any], settings: dict[str, Any], tasks: Iterable[str]) -> list[str]:
    """`SCORE_SETTINGS` that `earlier` (a step's results file of this package) records for `tasks`
    with another value than `settings`, each as "key <there> there, <now> now" (the weights first)."""
    recorded = earlier.get("config_general") or {}
    if VERSION_KEY not in recorded:  # lighteval's own results file records its settings otherwise
        return []
    generating = _any_generative(earlier, tasks)
    keys = [key for key in SCORE_SETTINGS if key != GENERATION_KEY or generating]
    return [
        f"{key} {recorded[key]!r} there, {settings[key]!r} now"
        for key in keys
        if key in recorded and key in settings and recorded[key] != settings[key]
    ]


def _any_generative(content: dict[str, Any], tasks: Iterable[str]) -> bool:
    """Whether one of `tasks` of `content` generates (a task recorded without the flag counts as one)."""
    config_tasks = content.get("config_tasks") or {}
    return any((config_tasks.get(task) or {}).get(GENERATIVE_KEY, True) for task in tasks)


def run_settings(content: dict[str, Any]) -> dict[str, Any]:
    """The settings one evaluation's results dict scored with: its `config_general`, without the
    generation parameters when none of its tasks generates (they applied to nothing)."""
    general = content.get("config_general") or {}
    if _any_generative(content, evaluated_names(content)):
        return general
    return {key: value for key, value in general.items() if key != GENERATION_KEY}


def evaluated_names(content: dict[str, Any]) -> list[str]:
    """The tasks (and held-out domains) a results file holds scores for, aggregates left out."""
    return [name for name in (content.get("results") or {}) if not is_aggregate_key(name)]


def merge_results(earlier: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new` (one evaluation's results dict) over `earlier` (the file's content): every task of
    `earlier` that `new` did not evaluate is kept; `config_general` is the newest run's, so a run
    whose score-changing settings differ from the kept tasks' is a `TrackingError`. The aggregates
    leave out the failed tasks without a score: one that failed again keeps its earlier score (same
    weights and settings), and with it the step's aggregates."""
    conflict = settings_conflict(earlier, run_settings(new), evaluated_names(new))
    if conflict is not None:
        raise TrackingError(f"Results not written: {conflict}")
    merged = {**earlier, **new}  # keys of the earlier file that this layout does not know are kept
    stale = stale_averages(earlier, new)
    for section in PER_TASK_SECTIONS:
        kept = {k: v for k, v in (earlier.get(section) or {}).items() if k != ALL_TASKS_KEY and k not in stale}
        merged[section] = {**kept, **{k: v for k, v in (new.get(section) or {}).items() if k != ALL_TASKS_KEY}}
    failed = {**(earlier.get(FAILED_TASKS_KEY) or {}), **(new.get(FAILED_TASKS_KEY) or {})}
    failed = {task: why for task, why in failed.items() if task not in (new.get("results") or {})}
    merged.pop(FAILED_TASKS_KEY, None)
    if failed:
        merged[FAILED_TASKS_KEY] = failed
    samples = {task: n for task, n in task_max_samples(earlier).items() if task not in stale}
    samples.update(task_max_samples(new))
    merged["config_general"] = {**(new.get("config_general") or {}), MAX_SAMPLES_BY_TASK: samples}
    kept = [task for task in evaluated_names(earlier) if task not in set(evaluated_names(new))]
    earlier_general = earlier.get("config_general") or {}
    if GENERATION_KEY not in run_settings(new) and GENERATION_KEY in earlier_general and _any_generative(earlier, kept):
        merged["config_general"][GENERATION_KEY] = earlier_general[GENERATION_KEY]  # the kept tasks' own
    task_results = {
        task: scores
        for task, scores in merged["results"].items()
        if isinstance(scores, dict) and not is_aggregate_key(task)
    }
    unscored = [task for task in failed if task not in task_results]  # a kept score still counts
    merged["results"] = with_aggregates(_as_numbers(task_results), unscored)
    merged.pop(SUITE_SCORE_KEY, None)
    if SIGNAL_KEY not in new:  # an earlier signal was computed from the scores replaced here
        merged.pop(SIGNAL_KEY, None)
    score = suite_score(merged["results"], unscored)
    if score:
        merged[SUITE_SCORE_KEY] = score
    summaries = {task: summary for task, summary in merged["summary_tasks"].items() if isinstance(summary, dict)}
    merged["summary_general"] = general_summary(summaries)
    return merged


def stale_averages(earlier: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """The averages over held-out domains (`heldout|_micro`, `_macro`: their `config_tasks` name
    their `domains`) that `earlier` holds over a domain `new` scores again and that `new` does not
    write itself: they were computed from the replaced scores, so the merge leaves them out."""
    rescored = set(evaluated_names(new))
    written = set(new.get("results") or {})
    return {
        key
        for key, described in (earlier.get("config_tasks") or {}).items()
        if isinstance(described, dict)
        and key not in written
        and isinstance(described.get("domains"), list)
        and rescored & set(described["domains"])
    }


def _as_numbers(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Scores as floats again (a `null` read back from a file is a NaN)."""
    return {
        task: {name: float("nan") if value is None else float(value) for name, value in scores.items()}
        for task, scores in results.items()
    }


def with_max_samples(content: dict[str, Any]) -> dict[str, Any]:
    """Record each task's max_samples in `config_general` (the key of a done task)."""
    general = dict(content.get("config_general") or {})
    general[MAX_SAMPLES_BY_TASK] = task_max_samples(content)
    return {**content, "config_general": general}


def _finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        found.append(path)
        return None
    if isinstance(value, dict):
        return {key: _finite(item, f"{path}.{key}" if path else str(key), found) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
    return value


def strict_json(content: dict[str, Any], default: Any = None) -> str:
    """Strict JSON text: non-finite floats become null, their paths listed in `config_general`."""
    plain = json.loads(json.dumps(content, default=default))  # numpy and friends as plain values first
    found: list[str] = []
    plain = _finite(plain, "", found)
    general = {k: v for k, v in (plain.get("config_general") or {}).items() if k != NON_FINITE_KEY}
    plain["config_general"] = {**general, NON_FINITE_KEY: found}
    return json.dumps(plain, indent=2, ensure_ascii=False, allow_nan=False)
