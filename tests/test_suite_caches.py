"""The suite reads and writes none of the machine's caches (tests/conftest.py): tests that read
benchmark data, run by pytest in a fresh process on a "machine" whose home and datasets cache hold
an `ai2_arc` entry built from a local folder (tests/helpers/datasets_cache.py), pass and leave that
home exactly as it was, their subprocesses (the README example's, the training ranks) included; the
run's own folder is removed at its end."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.datasets_cache import local_folder_entry

REPO = Path(__file__).resolve().parents[1]
DATA_READING = [
    "tests/tasks/test_data_origin.py::test_without_a_data_dir_the_slice_is_used_with_a_warning[offline]",
    "tests/test_readme_example.py::test_the_readme_python_example_runs_as_written",
    "tests/hook/test_train_errors.py::test_error_raised_on_the_ranks_is_printed_once",
]
"""Tests that failed on a machine whose cache held such an entry, before the suite had its own caches."""


def _listing(folder: Path) -> dict[str, tuple]:
    """Every path under `folder`, with the size and modification time of each file."""
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns) if path.is_file() else ()
        for path in folder.rglob("*")
    }


def test_data_reading_tests_pass_and_leave_the_machine_caches_as_they_were(tmp_path):
    home = tmp_path / "home"
    datasets_cache = home / ".cache" / "huggingface" / "datasets"
    local_folder_entry(datasets_cache, home / "benchmarks")
    before = _listing(home)
    assert any(name.startswith(".cache/huggingface/datasets/ai2_arc/ARC-Easy/0.0.0/") for name in before)
    (tmp_path / "tmp").mkdir()
    machine = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "HF_DATASETS_CACHE": str(datasets_cache)}
    env = {**os.environ, **machine, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TMPDIR": str(tmp_path / "tmp")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *DATA_READING]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    assert _listing(home) == before
    assert not list((tmp_path / "tmp").glob("lighteval-nanotron-tests-*"))  # the run's folder, removed
