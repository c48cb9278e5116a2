"""Metric curves across training steps, read back from results files, drawn with error bands.

Draws on matplotlib's Agg canvas directly (no pyplot), so it never changes the process's
matplotlib backend and works on headless machines.
"""

from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from lighteval_nanotron.steps import step_number
from lighteval_nanotron.tracking.paths import results_file_content
from lighteval_nanotron.tracking.scalars import STDERR_SUFFIX

logger = logging.getLogger(__name__)

# model -> task -> metric -> points sorted by step
History = dict[str, dict[str, dict[str, list["CurvePoint"]]]]


@dataclass(frozen=True)
class CurvePoint:
    step: int
    value: float
    stderr: float | None


def step_of(path: Path, content: dict) -> int | None:
    """`config_general.training_step`, else the step folder the file sits in (lighteval's
    Nanotron layout, `results/<run>/<step>/results_<date>.json`)."""
    step = (content.get("config_general") or {}).get("training_step")
    if isinstance(step, int) and not isinstance(step, bool):
        return step
    return step_number(path.parent.name)


def model_of(path: Path, content: dict, step: int) -> str:
    """The model's name; lighteval's Nanotron runs name it `<run>/<step>`: the run is the model."""
    general = content.get("config_general") or {}
    name = general.get("model_name")
    if not name or not isinstance(name, str):
        return path.parent.parent.name if path.parent.name == str(step) else path.parent.name
    return name.removesuffix(f"/{step}") if "training_step" not in general else name


def load_history(results_path: str | Path) -> History:
    """Every `results_*.json` under `results_path` (a file's folder, a model folder or a whole
    output folder), grouped by model, task and metric, one point per step: where several files
    hold a step's value, the latest file's (by name: the date), as `report` and the writer read
    them. Files without a training step are skipped."""
    root = Path(results_path)
    files = [root] if root.is_file() else sorted(root.rglob("results_*.json"))
    by_step: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for path in files:
        content, problem = results_file_content(path)
        if content is None:
            logger.warning("Skipping %s: not a readable results file (%s)", path, problem)
            continue
        step = step_of(path, content)
        if step is None:
            logger.warning("Skipping %s: it records no training step", path)
            continue
        model = model_of(path, content, step)
        for task, scores in (content.get("results") or {}).items():
            for metric, value in scores.items():
                if metric.endswith(STDERR_SUFFIX) or not isinstance(value, (int, float)):
                    continue
                stderr = scores.get(metric + STDERR_SUFFIX)
                by_step[model][task][metric][step] = CurvePoint(step, float(value), stderr)
    return {
        model: {
            task: {metric: [points[step] for step in sorted(points)] for metric, points in metrics.items()}
            for task, metrics in tasks.items()
        }
        for model, tasks in by_step.items()
    }


def _panels(history: History, tasks: list[str] | None, metrics: list[str] | None) -> list[tuple[str, str]]:
    """(task, metric) pairs present in any model, in first-seen order, filtered."""
    seen: dict[tuple[str, str], None] = {}
    for model_tasks in history.values():
        for task, task_metrics in model_tasks.items():
            if tasks and task not in tasks:
                continue
            for metric in task_metrics:
                if not metrics or metric in metrics:
                    seen[(task, metric)] = None
    return list(seen)


def _draw(axes, history: History, task: str, metric: str) -> None:
    for model, model_tasks in history.items():
        points = model_tasks.get(task, {}).get(metric)
        if not points:
            continue
        steps = [p.step for p in points]
        values = [p.value for p in points]
        line = axes.plot(steps, values, marker="o", markersize=3, label=model)[0]
        errors = [p.stderr if p.stderr is not None and math.isfinite(p.stderr) else 0.0 for p in points]
        if any(errors):
            low = [v - e for v, e in zip(values, errors, strict=True)]
            high = [v + e for v, e in zip(values, errors, strict=True)]
            axes.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    axes.set_title(f"{task}\n{metric}", fontsize=9)
    axes.set_xlabel("training step")
    axes.grid(True, alpha=0.3)
    if len(history) > 1:
        axes.legend(fontsize=7)


def new_figure(rows: int, cols: int, panel_size: tuple[float, float]):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(panel_size[0] * cols, panel_size[1] * rows), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, cols, squeeze=False)


def safe_filename(name: str) -> str:
    """`lighteval|arc:easy|0` -> `lighteval_arc-easy_0`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace(":", "-")).strip("_")


def plot_history(
    history: History,
    output_dir: str | Path,
    grid: bool = False,
    tasks: list[str] | None = None,
    metrics: list[str] | None = None,
    dpi: int = 100,
) -> list[Path]:
    """Write one PNG per task (a panel per metric), or with `grid` a single `metrics_grid.png`.

    Each model found is one line; the band is value ± standard error. Returns the PNG paths.
    """
    panels = _panels(history, tasks, metrics)
    if not panels:
        raise ValueError("Nothing to plot: no results with a training step match the given tasks/metrics.")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if grid:
        cols = math.ceil(math.sqrt(len(panels)))
        rows = math.ceil(len(panels) / cols)
        figure, axes = new_figure(rows, cols, (4.0, 3.0))
        for index, (task, metric) in enumerate(panels):
            _draw(axes[index // cols][index % cols], history, task, metric)
        for index in range(len(panels), rows * cols):
            axes[index // cols][index % cols].set_visible(False)
        path = output_dir / "metrics_grid.png"
        figure.savefig(path, dpi=dpi)
        return [path]
    paths = []
    by_task: dict[str, list[str]] = defaultdict(list)
    for task, metric in panels:
        by_task[task].append(metric)
    for task, task_metrics in by_task.items():
        figure, axes = new_figure(1, len(task_metrics), (4.0, 3.0))
        for column, metric in enumerate(task_metrics):
            _draw(axes[0][column], history, task, metric)
        path = output_dir / f"{safe_filename(task)}.png"
        figure.savefig(path, dpi=dpi)
        paths.append(path)
    return paths


def plot_results(
    results_path: str | Path,
    output_dir: str | Path,
    grid: bool = False,
    tasks: list[str] | None = None,
    metrics: list[str] | None = None,
) -> list[Path]:
    """`load_history` then `plot_history`: curves of every results file under `results_path`."""
    return plot_history(load_history(results_path), output_dir, grid=grid, tasks=tasks, metrics=metrics)
