"""One overview image per run: the training loss (with each held-out domain's loss on the same panel),
then one panel per task, on a shared step axis.

Each task panel shows its main metric (the first one its results list) against the training step,
with a ± one standard error band and, where it is known, the chance level as a dashed line: the
one the results record for the metric (`config_tasks[task].chance`, per doc from its golds and
choices, the one the signal analysis measures against), else for accuracy metrics of
multiple-choice tasks 1 / number of choices averaged over the docs of the details files (results
files lighteval wrote), or a value passed in `chance`. A task that reports the gold answer's bits per
byte (`gold_bpb`) gets a second panel with it, beside the first. lighteval's group averages and
`all` are left out (their tasks are shown).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from lighteval_nanotron.pipeline.result import ALL_TASKS_KEY, GROUP_MARK
from lighteval_nanotron.requests.held_out import HELD_OUT_PREFIX, is_held_out_key
from lighteval_nanotron.steps import numbered_folders
from lighteval_nanotron.tracking.paths import (
    results_dir,
    results_file_content,
    results_files_by_step,
    step_details_dir,
    step_details_root,
)
from lighteval_nanotron.tracking.plot import History, load_history, new_figure
from lighteval_nanotron.tracking.training_loss import read_training_loss, training_loss_path

logger = logging.getLogger(__name__)

Chance = dict[str, dict[str, float]]
"""task -> metric -> chance level."""

OVERVIEW_NAME = "overview.png"
GOLD_BPB = "gold_bpb"


def chance_levels(output_dir: str | Path, model_name: str) -> Chance:
    """Chance levels of a run's tasks: those its results record (the latest step's), and for a task
    whose results record none, its `acc*` metrics' from the details (`details_chance`)."""
    return {**details_chance(output_dir, model_name), **recorded_chance(output_dir, model_name)}


def recorded_chance(output_dir: str | Path, model_name: str) -> Chance:
    """Each task's `config_tasks[task].chance` in its latest results file that records it."""
    chance: Chance = {}
    for _, path in sorted(results_files_by_step(output_dir, model_name).items()):
        configs = (results_file_content(path)[0] or {}).get("config_tasks") or {}
        for task, config in configs.items():
            levels = config.get("chance") if isinstance(config, dict) else None
            if isinstance(levels, dict) and levels:
                chance[task] = {name: float(v) for name, v in levels.items() if isinstance(v, (int, float))}
    return chance


def details_chance(output_dir: str | Path, model_name: str) -> Chance:
    """Chance of `acc*` metrics for the multiple-choice tasks of a run: the mean of 1 / choices
    over the docs of its first details step (`<output_dir>/details/<model>/<step>/<date_id>/`);
    one gold per doc assumed (results files lighteval wrote record no chance)."""
    import pyarrow.parquet as pq

    root = step_details_root(output_dir, model_name, None)
    steps = [step for step, _ in numbered_folders(root)]
    folder = step_details_dir(output_dir, model_name, steps[0]) if steps else None
    chance: Chance = {}
    for path in sorted(folder.glob("details_*.parquet")) if folder is not None else []:
        try:
            table = pq.read_table(path, columns=["task_name", "sampling_method", "choices"]).to_pylist()
        except (OSError, ValueError, KeyError) as error:  # pyarrow's ArrowInvalid is a ValueError
            logger.warning("No chance level from %s: not a readable details file (%s)", path, error)
            continue
        scored = [row for row in table if "LOGPROB" in str(row["sampling_method"]).upper() and row["choices"]]
        if scored:
            level = sum(1 / len(row["choices"]) for row in scored) / len(scored)
            chance[scored[0]["task_name"]] = {"acc*": level}
    return chance


def _chance_for(chance: Chance, task: str, metric: str) -> float | None:
    levels = chance.get(task, {})
    if metric in levels:
        return levels[metric]
    return next((value for name, value in levels.items() if name.endswith("*") and metric.startswith(name[:-1])), None)


def _main_metrics(history: History, model: str) -> list[tuple[str, str]]:
    """(task, metric) panels: each task's first metric, and its gold bits per byte when it has them."""
    panels = []
    for task, metrics in history[model].items():
        if task == ALL_TASKS_KEY or GROUP_MARK in task or is_held_out_key(task) or not metrics:
            continue
        first = next(iter(metrics))
        panels.append((task, first))
        if GOLD_BPB in metrics and first != GOLD_BPB:
            panels.append((task, GOLD_BPB))
    return panels


def _held_out_losses(history: History, model: str) -> dict[str, Any]:
    """Each held-out domain's loss points (drawn on the training loss's panel: the same unit)."""
    return {
        task: metrics["loss"]
        for task, metrics in history[model].items()
        if is_held_out_key(task) and not task.startswith(HELD_OUT_PREFIX + "_") and "loss" in metrics
    }


def plot_overview(
    output_dir: str | Path,
    model_name: str,
    path: str | Path | None = None,
    chance: Chance | None = None,
    dpi: int = 110,
) -> Path:
    """Write the overview PNG of one run (default `<output_dir>/plots/overview.png`); returns its path.

    `chance` adds or overrides chance levels (`{task: {metric: level}}`; a metric name ending in
    `*` matches every metric with that prefix)."""
    output_dir = Path(output_dir)
    history = load_history(results_dir(output_dir, model_name))
    if not history:
        raise ValueError(
            f"Nothing to plot: no results with a training step under {results_dir(output_dir, model_name)}."
        )
    model = next(iter(history))
    levels = {**chance_levels(output_dir, model_name), **(chance or {})}
    loss = read_training_loss(training_loss_path(output_dir, model_name))
    held_out = _held_out_losses(history, model)
    panels = _main_metrics(history, model)
    count = len(panels) + (1 if loss or held_out else 0)
    cols = min(4 if any(metric == GOLD_BPB for _, metric in panels) else 3, count)
    rows = math.ceil(count / cols)
    figure, axes = new_figure(rows, cols, (4.2, 3.0))
    flat = [axes[row][col] for row in range(rows) for col in range(cols)]
    if loss or held_out:
        _draw_loss(flat[0], loss, held_out)
    for axis, (task, metric) in zip(flat[1 if loss or held_out else 0 :], panels):
        _draw_task(axis, history[model][task][metric], task, metric, _chance_for(levels, task, metric))
    for axis in flat[count:]:
        axis.set_visible(False)
    for axis in flat[1:count]:
        axis.sharex(flat[0])
    figure.suptitle(f"{model}: evaluation during training", fontsize=11)
    path = Path(path) if path is not None else output_dir / "plots" / OVERVIEW_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    return path


def _draw_loss(axis, loss: list[tuple[int, float]], held_out: dict[str, Any]) -> None:
    """The training loss and each held-out domain's loss (nats per token both), with its stderr band."""
    if loss:
        steps, values = [step for step, _ in loss], [value for _, value in loss]
        axis.plot(steps, values, color="black", marker=".", markersize=3, label="training")
    for task, points in held_out.items():
        steps, values = [p.step for p in points], [p.value for p in points]
        line = axis.plot(steps, values, marker="o", markersize=3, label=task)[0]
        errors = [p.stderr if p.stderr is not None and math.isfinite(p.stderr) else 0.0 for p in points]
        low = [value - error for value, error in zip(values, errors)]
        high = [value + error for value, error in zip(values, errors)]
        axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    axis.set_title("loss (nats per token)\ntraining and held-out", fontsize=9)
    if held_out:
        axis.legend(fontsize=7, loc="best")
    axis.set_xlabel("training step")
    axis.grid(True, alpha=0.3)


def _draw_task(axis, points, task: str, metric: str, chance: float | None) -> None:
    steps = [point.step for point in points]
    values = [point.value for point in points]
    line = axis.plot(steps, values, marker="o", markersize=3)[0]
    errors = [p.stderr if p.stderr is not None and math.isfinite(p.stderr) else 0.0 for p in points]
    if any(errors):
        low = [value - error for value, error in zip(values, errors)]
        high = [value + error for value, error in zip(values, errors)]
        axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0, label="± stderr")
    if chance is not None:
        axis.axhline(chance, color="grey", linestyle="--", linewidth=1, label=f"chance {chance:.2f}")
    if metric.startswith(("acc", "em", "f1")) or metric.endswith("exact_match"):
        axis.set_ylim(-0.05, 1.05)
    axis.set_title(f"{task}\n{metric}", fontsize=9)
    axis.set_xlabel("training step")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7, loc="best")
