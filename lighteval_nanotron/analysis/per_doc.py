"""Two runs compared doc by doc, from their per-doc details files: at the last step both evaluated,
and over the mean of their last k common evaluations (each doc's value averaged over those steps,
which lowers the checkpoint-to-checkpoint noise: Signal and Noise, Heineman et al. 2025).

A doc is the same in both runs when its id, sampling method and full prompt are, and the results
record the same docs for its task (`summary_tasks` hashes, a held-out domain's windows digest):
the same `max_samples` over another data source, or other few-shot examples, gives no shared doc
and so the unpaired comparison, said in the table. Statistics: `paired`.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.paired import (
    CENTERED_SUFFIX,
    DocComparison,
    adjusted,
    compare_docs,
    task_verdict,
)
from lighteval_nanotron.analysis.signal import DEFAULT_SETTINGS, SignalSettings, analyze
from lighteval_nanotron.requests.held_out import held_out_key
from lighteval_nanotron.tracking.paths import details_task_name

DocValues = dict[str, dict[str, dict[str, float]]]
"""{task: {metric: {doc key: value}}}"""
NO_DETAILS = "no per-doc details (add `details` to the loggers)"


def _doc_keys(table, task_docs: str) -> list[str]:
    prompts = table.column("full_prompt").to_pylist()
    ids, methods = table.column("doc_id").to_pylist(), table.column("sampling_method").to_pylist()
    return [
        f"{doc}|{method}|{hashlib.sha1(f'{task_docs}|{prompt}'.encode()).hexdigest()[:16]}"
        for doc, method, prompt in zip(ids, methods, prompts)
    ]


def doc_values(run: RunHistory, step: int) -> DocValues:
    """The per-doc value of every metric the results hold, per task, at `step` (a later details
    folder of the step replaces an earlier one's task: a re-evaluation)."""
    found: DocValues = {}
    for folder in run.details.get(step, []):
        for file in sorted(folder.glob("details_*.parquet")) if folder.is_dir() else []:
            task = details_task_name(file)
            table = pq.read_table(file, columns=["doc_id", "sampling_method", "full_prompt", "metrics"])
            keys = _doc_keys(table, repr(_task_docs(run, task, step)))
            metrics = table.column("metrics")
            values: dict[str, dict[str, float]] = {}
            fields = list(metrics.type) if pa.types.is_struct(metrics.type) else []
            for name in [f.name for f in fields if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)]:
                if name.endswith(CENTERED_SUFFIX) or (task, name) not in run.series:
                    continue  # a centered twin (the same test), or a per-doc count that is no result
                column = pc.struct_field(metrics, name)
                values[name] = {
                    key: float(v) for key, v in zip(keys, column.to_pylist()) if v is not None and math.isfinite(v)
                }
            found[task] = values
    return found


def _task_docs(run: RunHistory, task: str, step: int) -> tuple:
    """What the results file says the task's docs were at `step` (max_samples, hashes, digest)."""
    for (entry, _), series in run.series.items():
        if entry == task:
            for point in series.points:
                if point.step == step:
                    return point.docs
    return ()


HELD_OUT_AVERAGES = {held_out_key("_micro"), held_out_key("_macro")}
"""The held-out averages over domains: aggregates, with no per-doc details of their own."""


def _tasks_at(run: RunHistory, step: int) -> list[str]:
    """The tasks (no group average, suite score or held-out average) with a result at `step`."""
    found = {e for (e, _), s in run.series.items() if any(p.step == step and p.tasks() == {e} for p in s.points)}
    return [task for task in dict.fromkeys(e for e, _ in run.series) if task in found - HELD_OUT_AVERAGES]


def _mean_over_steps(per_step: list[DocValues]) -> DocValues:
    """Each doc's mean over the steps (docs scored at every one of them)."""
    merged: DocValues = {}
    for task in per_step[-1]:
        for metric in per_step[-1][task]:
            tables = [values.get(task, {}).get(metric, {}) for values in per_step]
            docs = set.intersection(*(set(table) for table in tables))
            merged.setdefault(task, {})[metric] = {doc: sum(t[doc] for t in tables) / len(tables) for doc in docs}
    return merged


@dataclass
class PairTable:
    """One table of two runs: every task and metric at `steps` (one step, or the last k common)."""

    run_a: str
    run_b: str
    steps: list[int]
    comparisons: list[DocComparison] = field(default_factory=list)
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)
    """task -> (verdict, why)."""
    note: str = ""
    """Why nothing was compared (no per-doc details in a run at these steps)."""

    def to_dict(self) -> dict:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "steps": self.steps,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "verdicts": {task: {"verdict": v, "why": why} for task, (v, why) in self.verdicts.items()},
            "note": self.note,
        }


def compare_pair(
    run_a: RunHistory,
    run_b: RunHistory,
    last: int = 1,
    seed: int = 0,
    effect: float | None = None,
    settings: SignalSettings = DEFAULT_SETTINGS,
    seed_runs: Sequence[RunHistory] = (),
) -> list[PairTable]:
    """The table at the last step both runs evaluated, and (with `last` > 1) the table over the
    mean of their last `last` common evaluations; none when they share no step. `seed_runs`:
    runs of one config at other seeds, whose spread joins the noise (`paired`)."""
    common = sorted(set(run_a.details) & set(run_b.details))
    if not common:
        return []
    windows = [common[-1:]] + ([common[-last:]] if last > 1 and len(common) > 1 else [])
    tables = []
    for steps in windows:
        a = _mean_over_steps([doc_values(run_a, step) for step in steps])
        b = _mean_over_steps([doc_values(run_b, step) for step in steps])
        tables.append(_table(run_a, run_b, steps, a, b, seed, effect, settings, seed_runs))
    return tables


def _noises(
    run_a: RunHistory,
    run_b: RunHistory,
    task: str,
    metric: str,
    steps: list[int],
    settings: SignalSettings,
    seed_runs: Sequence[RunHistory],
) -> dict[str, float | int | None]:
    """`checkpoint_noise`, sqrt(noise_A^2 + noise_B^2) / sqrt(len(steps)) at the last of `steps`,
    and `seed_noise`, the std (ddof 1) across `seed_runs` of the value's mean over `steps`
    (0 without seed runs; None where unmeasured)."""
    noises = []
    for run in (run_a, run_b):
        series = run.series.get((task, metric))
        cut = series.up_to(steps[-1]) if series is not None else None
        noises.append(analyze(cut, settings).noise if cut is not None and cut.points else None)
    checkpoint = None if None in noises else math.sqrt(sum(n**2 for n in noises) / len(steps))
    if not seed_runs:
        return {"checkpoint_noise": checkpoint, "seed_noise": 0.0, "seed_runs": 0}
    values = []
    for run in seed_runs:
        series = run.series.get((task, metric))
        found = {p.step: p.value for p in series.points} if series is not None else {}
        if all(step in found for step in steps):
            values.append(sum(found[step] for step in steps) / len(steps))
    spread = statistics.stdev(values) if len(values) >= 2 else None
    return {"checkpoint_noise": checkpoint, "seed_noise": spread, "seed_runs": len(values)}


def _table(
    run_a: RunHistory,
    run_b: RunHistory,
    steps: list[int],
    a: DocValues,
    b: DocValues,
    seed: int,
    effect: float | None,
    settings: SignalSettings,
    seed_runs: Sequence[RunHistory],
) -> PairTable:
    table = PairTable(run_a.name, run_b.name, steps)
    if not a or not b:
        table.note = NO_DETAILS
        return table
    found: list[DocComparison] = []
    reasons: dict[str, list[str]] = {}
    scored = [task for task in _tasks_at(run_a, steps[-1]) if task in _tasks_at(run_b, steps[-1])]
    for task in dict.fromkeys([*a, *b, *scored]):
        if task not in a and task not in b:
            reasons[task] = [NO_DETAILS]
            continue
        if task not in a or task not in b:
            reasons[task] = [f"per-doc details in {run_a.name if task in a else run_b.name} only"]
            continue
        for metric, values in a[task].items():
            if metric not in b[task]:
                continue
            direction = run_a.series[(task, metric)].higher_is_better
            result = compare_docs(task, metric, values, b[task][metric], direction, seed, effect)
            if isinstance(result, str):
                reasons.setdefault(task, []).append(f"{metric}: {result}")
            else:
                found.append(replace(result, **_noises(run_a, run_b, task, metric, steps, settings, seed_runs)))
    table.comparisons = adjusted(found)
    for task in dict.fromkeys([*a, *b, *scored]):
        mine = [c for c in table.comparisons if c.task == task]
        table.verdicts[task] = task_verdict(mine, reasons.get(task, []))
    return table
