"""The per-evaluation progress: a bar (docs done, docs/s and ETA) only on a terminal and when asked,
advanced per micro-batch for a planning model; lines to a log function at a bounded rate."""

import io
import re
import sys

import helpers_pipeline
import pytest
from helpers_pipeline import ALL_TOY_TASKS, BigramLM, PlanningBigramLM

from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _run(monkeypatch, stream, progress_bar, model=None, **progress_log):
    monkeypatch.setattr(sys, "stderr", stream)
    pipeline = EvaluationPipeline.prepare(
        model or BigramLM(),
        ALL_TOY_TASKS,
        PipelineSettings(custom_tasks=helpers_pipeline, progress_bar=progress_bar, **progress_log),
    )
    total = sum(len(group.docs) for group in pipeline.groups)
    result = pipeline.run(step=7)
    return result, total, stream.getvalue()


def test_bar_counts_every_doc_on_a_terminal(toy_data, monkeypatch):
    from functools import partial

    from tqdm import tqdm

    from lighteval_nanotron.pipeline import progress

    monkeypatch.setattr(progress, "tqdm", partial(tqdm, mininterval=0, miniters=1))  # draw every update, however fast
    result, total, shown = _run(monkeypatch, _Terminal(), progress_bar=True)
    assert result is not None
    assert "evaluation at step 7" in shown
    assert f"{total}/{total}" in shown and "doc/s" in shown
    assert f"0/{total}" in shown  # it starts at zero and advances group by group


@pytest.mark.parametrize("stream, show", [(io.StringIO(), True), (_Terminal(), False)])
def test_quiet_off_a_terminal_or_when_disabled(toy_data, monkeypatch, stream, show):
    _, _, shown = _run(monkeypatch, stream, progress_bar=show)
    assert shown == ""


def _draw_every_update(monkeypatch):
    from functools import partial

    from tqdm import tqdm

    from lighteval_nanotron.pipeline import progress

    monkeypatch.setattr(progress, "tqdm", partial(tqdm, mininterval=0, miniters=1))


def test_a_planning_model_advances_the_bar_per_micro_batch(toy_data, monkeypatch):
    """PlanningBigramLM tells the end of each doc (its micro-batch): every count is drawn, not one per group."""
    _draw_every_update(monkeypatch)
    result, total, shown = _run(monkeypatch, _Terminal(), progress_bar=True, model=PlanningBigramLM())
    assert result is not None
    counts = {int(n) for n in re.findall(rf"\| *(\d+)/{total} ", shown)}
    assert counts == set(range(total + 1)), counts
    assert shown.rstrip("\n").rsplit("\r", 1)[-1].startswith("evaluation at step 7: 100%")  # left on screen


def test_progress_lines_go_to_the_log_function(toy_data, monkeypatch):
    lines = []
    _, total, shown = _run(
        monkeypatch,
        io.StringIO(),
        progress_bar=True,
        model=PlanningBigramLM(),
        progress_log=lines.append,
        progress_interval_s=0,
    )
    assert shown == ""  # no bar into a file
    pattern = re.compile(rf"evaluation at step 7: (\d+)/{total} docs \(\d+%\), [\d.]+ docs/s, [\d:?]+ left")
    assert lines and all(pattern.fullmatch(line) for line in lines), lines
    done = [int(pattern.fullmatch(line).group(1)) for line in lines]
    assert done == sorted(done) and len(set(done)) > 4 and done[-1] == total


def test_no_progress_lines_for_an_evaluation_shorter_than_the_interval(toy_data, monkeypatch):
    lines = []
    model = PlanningBigramLM()
    _run(monkeypatch, io.StringIO(), True, model=model, progress_log=lines.append, progress_interval_s=3600)
    assert lines == []


def test_no_progress_lines_when_progress_is_off(toy_data, monkeypatch):
    lines = []
    _run(monkeypatch, io.StringIO(), False, model=PlanningBigramLM(), progress_log=lines.append, progress_interval_s=0)
    assert lines == []
