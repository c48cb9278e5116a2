"""The content of one step's results file: strict JSON, merged with what an earlier run wrote.

A step's file holds one identity (`config_general.identity`, written by `setup.step`: the options
that change scores, the prompt and decoding settings, the dtype, the weights' fingerprint). A run
whose identity differs from the file's on a key both record is refused (`settings_conflict`), whatever
tasks it evaluates; with the same identity, a later run's tasks are added and a task evaluated
again replaces only its own entries. Each task's data is recorded beside it (`config_tasks`: its
docs' or windows' digest). The aggregates (`all`, lighteval's group averages, the suite score)
and `summary_general` are recomputed over the merged tasks. Non-finite numbers (a NaN standard
error of a one-doc task, say) are written as `null` and listed under
`config_general.non_finite_values`, so strict JSON parsers read the file.
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
    SIGNAL_KEY,
    SUITE_SCORE_KEY,
    TASK_COSTS_KEY,
    VERSION_KEY,
    WEIGHTS_KEY,
)
from lighteval_nanotron.pipeline.summary import general_summary
from lighteval_nanotron.requests.doc import DOCS_DIGEST
from lighteval_nanotron.requests.held_out import WINDOWS_DIGEST

PER_TASK_SECTIONS = ("results", "versions", "config_tasks", "summary_tasks", TASK_COSTS_KEY)
MAX_SAMPLES_BY_TASK = "max_samples_by_task"
NON_FINITE_KEY = "non_finite_values"
FAILED_TASKS_KEY = "failed_tasks"
IDENTITY_KEY = "identity"
"""The `config_general` key of a step's identity (`setup.step.run_identity`, with the weights)."""


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


def evaluated_tasks(
    content: dict[str, Any], identity: dict[str, Any] | None = None
) -> dict[tuple[str, int | None], str | None]:
    """The (task, max_samples) pairs a results file holds results for, each with the digest of the
    data it was scored on (`config_tasks[task]`: its docs' `docs_sha256`, a domain's
    `windows_sha256`; None for files written before they were recorded). Nothing when the file's
    identity differs from `identity` (the weights left out: not known before a checkpoint loads)."""
    if identity is not None and differing_settings(content, identity, ignore=(WEIGHTS_KEY,)):
        return {}
    results = content.get("results") or {}
    described = content.get("config_tasks") or {}
    return {
        (task, samples): _data_digest(described.get(task))
        for task, samples in task_max_samples(content).items()
        if task in results
    }


def _data_digest(described: Any) -> str | None:
    digest = described.get(WINDOWS_DIGEST) or described.get(DOCS_DIGEST) if isinstance(described, dict) else None
    return digest if isinstance(digest, str) else None


def recorded_identity(content: dict[str, Any]) -> dict[str, Any]:
    """The identity a results dict records (`IDENTITY_KEY`; {} in a file written before identities)."""
    identity = (content.get("config_general") or {}).get(IDENTITY_KEY)
    return identity if isinstance(identity, dict) else {}


def settings_conflict(earlier: dict[str, Any], identity: dict[str, Any], evaluated: Iterable[str]) -> str | None:
    """Why a run of `identity` that evaluates the tasks `evaluated` cannot be written into `earlier`
    (a step's results file of this package): one key of the step's identity differs, whichever
    tasks the run evaluates (a file holds one identity). None when it can."""
    if VERSION_KEY not in (earlier.get("config_general") or {}):  # lighteval's own file
        return None
    differing = differing_settings(earlier, identity)
    if not differing:
        return None
    names = sorted(evaluated_names(earlier) or earlier.get(FAILED_TASKS_KEY) or {})
    kept = ", ".join([task for task in names if task not in set(evaluated)] or names)
    if differing[0].startswith(WEIGHTS_KEY):  # the weights sort last: nothing else differs
        return (
            f"the step's results file holds {kept} measured on other weights ({differing[0]}): another checkpoint "
            "evaluated under this model name and step. Give this checkpoint another model name (`model_name`, "
            "`--model-name`) or output folder, or move that step's results folder away to evaluate it again."
        )
    return (
        f"the step's results file holds {kept} scored with other settings ({'; '.join(differing)}): one step's "
        "file holds one identity. Evaluate with the same settings, or write to another output folder or model name "
        "(`model_name`, `--model-name`)."
    )


def differing_settings(earlier: dict[str, Any], identity: dict[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """The keys of `identity` that `earlier` (a step's results file) records with another value, each
    as "key <there> there, <now> now", the weights last. A key one side does not record (decoding
    where no task generates; a key newer than the file) is not compared."""
    recorded = recorded_identity(earlier)
    keys = sorted((recorded.keys() & identity.keys()) - set(ignore), key=lambda key: (key == WEIGHTS_KEY, key))
    return [f"{key} {recorded[key]!r} there, {identity[key]!r} now" for key in keys if recorded[key] != identity[key]]


def evaluated_names(content: dict[str, Any]) -> list[str]:
    """The tasks (and held-out domains) a results file holds scores for, aggregates left out."""
    return [name for name in (content.get("results") or {}) if not is_aggregate_key(name)]


def merge_results(earlier: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new` (one evaluation's results dict) over `earlier` (the file's content): every task of
    `earlier` that `new` did not evaluate is kept; `config_general` is the newest run's, so a run
    whose identity differs from the file's is a `TrackingError`. The aggregates
    leave out the failed tasks without a score: one that failed again keeps its earlier score (same
    weights and settings), and with it the step's aggregates."""
    conflict = settings_conflict(earlier, recorded_identity(new), evaluated_names(new))
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
    identity = {**recorded_identity(earlier), **recorded_identity(new)}  # equal where both record a key
    if identity:
        merged["config_general"][IDENTITY_KEY] = identity
    if GENERATION_KEY in identity:  # the generating tasks' own, kept or new
        merged["config_general"][GENERATION_KEY] = identity[GENERATION_KEY]
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
