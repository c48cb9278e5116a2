"""The signal section of a results file, and the training hook's running history of its run."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lighteval_nanotron.analysis.history import RunHistory, load_runs
from lighteval_nanotron.analysis.signal import DEFAULT_SETTINGS, SignalSettings, analyze
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.paths import results_dir, results_file_content, results_files_by_step
from lighteval_nanotron.tracking.results_file import (
    evaluated_names,
    merge_results,
    recorded_identity,
    settings_conflict,
)

logger = logging.getLogger(__name__)


def signal_section(run: RunHistory, settings: SignalSettings, step: int | None = None) -> dict[str, Any]:
    """`{"settings": {...}, "series": {entry: {metric: quantities}}}` of `run` (at `step`: only the
    evaluations up to it), the entries as `RunHistory.entries` lists them."""
    series: dict[str, dict[str, Any]] = {}
    for entry in run.entries():
        for metric in run.metrics(entry):
            found = run.series[(entry, metric)]
            if step is not None:
                found = found.up_to(step)
            if found.points:
                series.setdefault(entry, {})[metric] = analyze(found, settings).to_dict()
    return {"settings": asdict(settings), "series": series}


class LiveSignal:
    """On the reporting rank of a training run: the run's results already on disk (a restarted
    run), then each new evaluation; `attach(result)` adds the signal up to the result's step."""

    def __init__(self, output_dir: str | Path, model_name: str, settings: SignalSettings = DEFAULT_SETTINGS) -> None:
        self.settings = settings
        self.output_dir, self.model_name = output_dir, model_name
        folder = results_dir(output_dir, model_name)
        runs = load_runs(folder) if folder.is_dir() else {}
        self.history = runs.get(model_name) or RunHistory(model_name)

    def _as_written(self, result: EvaluationResult) -> dict[str, Any]:
        """The step's results as its file will hold them: a result that evaluates only some tasks of
        a step already written is merged into that file (its suite score is the whole step's)."""
        content = result.to_dict()
        path = results_files_by_step(self.output_dir, self.model_name).get(result.step)
        earlier = results_file_content(path)[0] if path is not None else None
        if earlier is None or settings_conflict(earlier, recorded_identity(content), evaluated_names(content)):
            return content  # nothing to merge with, or a merge the results logger refuses
        return merge_results(earlier, content)

    def attach(self, result: EvaluationResult) -> None:
        """Set `result.signal`. A failure here is logged and leaves the results as they are."""
        if result.step is None:
            return
        try:
            self.history.add(result.step, self._as_written(result))
            result.signal = signal_section(self.history, self.settings, result.step)
        except Exception:  # noqa: BLE001 - the analysis must never cost the evaluation's results
            logger.warning(
                "The signal analysis failed at step %s; results are written without it", result.step, exc_info=True
            )
