"""Fixtures of the task-layer tests: the toy custom tasks and their local data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from lighteval_nanotron.tasks import Registry, set_data_dirs
from tests.tasks.toy_paths import DATA_DIR, TOY_TASKS


@pytest.fixture(autouse=True)
def toy_data_dirs(monkeypatch):
    """Every test sees only the toy data dir, and leaves the process setting as it found it."""
    monkeypatch.delenv("LIGHTEVAL_NANOTRON_DATA_DIRS", raising=False)
    set_data_dirs([str(DATA_DIR)])
    yield DATA_DIR
    set_data_dirs(None)


@pytest.fixture
def load_toy():
    """`load_toy(spec)` -> {full_name: LightevalTask} for specs over the toy custom tasks."""

    def load(spec):
        return Registry(tasks=spec, custom_tasks=TOY_TASKS).load_tasks()

    return load


@pytest.fixture
def toy_task(load_toy):
    """`toy_task(spec)` -> the single task of a one-task spec."""

    def get(spec):
        tasks = load_toy(spec)
        assert len(tasks) == 1, list(tasks)
        return next(iter(tasks.values()))

    return get
