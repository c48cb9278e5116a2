"""Evaluations writing to one output folder at once lose nothing: the read-merge-replace of a step's
results file and the step's date id (shared by results and details) are decided under one lock per
folder, with a bounded wait. Real processes writing at the same moment, real files."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers_tracking import _detail

from lighteval_nanotron.errors import TrackingError
from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking import ResultsJsonLogger, TrackingConfig, results_files_by_step
from lighteval_nanotron.tracking.output_lock import LOCK_NAME, output_lock

STEP, ROUNDS = 40, 12


def _result(task: str, acc: float, start_time: float) -> EvaluationResult:
    return EvaluationResult(
        model_name="run",
        results={task: {"acc": acc, "acc_stderr": 0.1}},
        details={task: [_detail(task, i, correct=i % 2 == 0) for i in range(3)]},
        versions={task: 0},
        config_tasks={task: {"name": task}},
        summary_tasks={task: {"truncated": 0, "num_samples": 3}},
        summary_general={},
        wall_time_s=1.0,
        start_time=start_time,
        end_time=start_time + 1.0,
        step=STEP,
        max_samples=3,
    )


def _writer(output_dir: str, task: str, start_time: float, barrier) -> None:
    """A process writing its task's results and details at the step, ROUNDS times, started with the other."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))  # helpers_tracking in the spawned process
    loggers = TrackingConfig(output_dir=output_dir, loggers=["json", "details"]).build()
    barrier.wait(timeout=60)
    for round_ in range(ROUNDS):
        loggers.log(_result(task, round_ / ROUNDS, start_time))


def test_two_processes_writing_one_step_keep_both_tasks_in_one_file_and_one_details_folder(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    writers = [
        context.Process(target=_writer, args=(str(tmp_path), task, start, barrier))
        for task, start in (("custom|first|0", 1_700_000_000.0), ("custom|second|0", 1_700_000_100.0))
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
        assert writer.exitcode == 0
    (path,) = (tmp_path / "results" / "run" / str(STEP)).iterdir()  # one file: one date id for the step
    content = json.loads(path.read_text())
    last = (ROUNDS - 1) / ROUNDS
    assert content["results"]["custom|first|0"]["acc"] == content["results"]["custom|second|0"]["acc"] == last
    assert content["config_general"]["max_samples_by_task"] == {"custom|first|0": 3, "custom|second|0": 3}
    (details,) = (tmp_path / "details" / "run" / str(STEP)).iterdir()
    assert details.name == path.stem.removeprefix("results_")
    assert sorted(pq.read_table(p).column("task_name")[0].as_py() for p in details.iterdir()) == [
        "custom|first|0",
        "custom|second|0",
    ]


def _hold_lock(output_dir: str, seconds: float, ready) -> None:
    with output_lock(output_dir):
        ready.set()
        time.sleep(seconds)


def test_a_writer_waits_for_the_lock_a_bounded_time_then_fails_naming_it(tmp_path):
    logger = ResultsJsonLogger(tmp_path)
    logger.log(_result("custom|first|0", 0.5, 1_700_000_000.0))
    before = logger.last_path.read_bytes()
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold_lock, args=(str(tmp_path), 30.0, ready))
    holder.start()
    try:
        assert ready.wait(timeout=60)
        with pytest.raises(TrackingError, match=rf"write lock .*{LOCK_NAME}\) .*1s"):
            with output_lock(tmp_path, timeout_s=1.0):
                pass
    finally:
        holder.kill()  # the kernel releases a dead process's lock: no stale lock
        holder.join(timeout=30)
    logger.log(_result("custom|second|0", 0.25, 1_700_000_100.0))
    assert logger.last_path.read_bytes() != before
    assert set(json.loads(logger.last_path.read_text())["results"]) == {"custom|first|0", "custom|second|0", "all"}
    assert list(results_files_by_step(tmp_path, "run")) == [STEP]
