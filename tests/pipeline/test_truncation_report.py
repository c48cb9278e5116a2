"""Truncation is said on the console when requests are prepared: per task, how many contexts were cut
from the left, how many continuations are longer than the window (scored on their tail only) and
how many generations ask for more tokens than the window leaves, once, on the reporting rank. Real
tiny Llama at TP2 with an 8-token window over the bundled slices."""

from __future__ import annotations

import re

from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

TASKS = "lighteval|arc:easy|0,lighteval|triviaqa|0"


def _prepare_and_listen(checkpoint: str, tp: int) -> tuple:
    """Rank function: prepare and run the tasks with a tiny window; (console warnings of the
    truncation logger, whether this rank reports, `summary_tasks` of the result)."""
    import logging

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings
    from lighteval_nanotron.tasks import set_data_dirs
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    set_data_dirs(["bundled"])
    context = parallel_context(tp, 1, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    heard: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: heard.append(record.getMessage())
    logging.getLogger("lighteval_nanotron.pipeline.truncation").addHandler(handler)
    config = EngineConfig(max_length=8, default_max_new_tokens=2)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), config)
    pipeline = EvaluationPipeline.prepare(engine, TASKS, PipelineSettings(max_samples=6, model_name="tiny"))
    result = pipeline.run(step=1)
    return heard, engine.is_reporting_rank, None if result is None else result.summary_tasks


def test_truncated_contexts_and_continuations_are_counted_on_the_console_once(tiny_checkpoint):  # noqa: F811
    ranks = run_distributed(_prepare_and_listen, 2, str(tiny_checkpoint), 2, timeout=180)
    (reporting,) = [rank for rank in ranks if rank[1]]
    assert all(not heard for heard, is_reporting, _ in ranks if not is_reporting)  # said once
    heard, _, summary = reporting
    assert len(heard) == 2, heard
    by_task = {line.split()[1].removesuffix(":"): line for line in heard}
    arc, trivia = by_task["lighteval|arc:easy|0"], by_task["lighteval|triviaqa|0"]
    contexts = re.search(r"(\d+) of 6 requests have a context longer than the model's 8-token window", arc)
    tails = re.search(r"(\d+) of 6 requests have a continuation longer than the model's 8-token window", arc)
    assert contexts and tails and "only its last tokens are scored" in arc
    # every doc of the results' `truncated` count is on the console: cut context or unscored choice tokens
    assert summary["lighteval|arc:easy|0"]["truncated"] == int(contexts.group(1)) == 6
    assert 0 < int(tails.group(1)) <= 6
    assert "6 of 6 requests have a context longer" in trivia and "continuation" not in trivia
    assert "6 of 6 requests ask for more new tokens than the model's 8-token window leaves" in trivia  # 20 asked
    assert summary["lighteval|triviaqa|0"]["truncated"] == 6
