"""The per-evaluation progress bar: docs done, docs/s and ETA, only on a terminal and when asked."""

import io
import sys

import helpers_pipeline
import pytest
from helpers_pipeline import ALL_TOY_TASKS, BigramLM

from lighteval_nanotron.pipeline import EvaluationPipeline


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _run(monkeypatch, stream, show_progress):
    monkeypatch.setattr(sys, "stderr", stream)
    pipeline = EvaluationPipeline.prepare(
        BigramLM(), ALL_TOY_TASKS, custom_tasks=helpers_pipeline, show_progress=show_progress
    )
    total = sum(len(group.docs) for group in pipeline.groups)
    result = pipeline.run(step=7)
    return result, total, stream.getvalue()


def test_bar_counts_every_doc_on_a_terminal(toy_data, monkeypatch):
    from functools import partial

    from tqdm import tqdm

    from lighteval_nanotron.pipeline import progress

    monkeypatch.setattr(progress, "tqdm", partial(tqdm, mininterval=0, miniters=1))  # draw every update, however fast
    result, total, shown = _run(monkeypatch, _Terminal(), show_progress=True)
    assert result is not None
    assert "evaluation at step 7" in shown
    assert f"{total}/{total}" in shown and "doc/s" in shown
    assert f"0/{total}" in shown  # it starts at zero and advances group by group


@pytest.mark.parametrize("stream, show", [(io.StringIO(), True), (_Terminal(), False)])
def test_quiet_off_a_terminal_or_when_disabled(toy_data, monkeypatch, stream, show):
    _, _, shown = _run(monkeypatch, stream, show_progress=show)
    assert shown == ""
