"""What reaches the console (`nanotron_compat.console`): quieting Nanotron's loggers before its
modules are imported must not make them print each record twice; a library's warnings (its own
console handler besides the command's) reach `eval`'s console once."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.datasets_cache import hub_commit_entry, local_folder_entry
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

REPO = Path(__file__).resolve().parents[2]

CHECK = """
import logging
from lighteval_nanotron.cpu import enable_cpu_support
from lighteval_nanotron.nanotron_compat.console import NANOTRON_LOGGERS
from lighteval_nanotron.nanotron_compat.imports import import_nanotron, import_nanotron_trainer
enable_cpu_support(trainer=False)
import_nanotron()  # quiets Nanotron before its trainer is imported
assert "nanotron.trainer" not in logging.root.manager.loggerDict
import_nanotron_trainer()  # and again after
for name in NANOTRON_LOGGERS:
    logger = logging.getLogger(name)
    assert logger.propagate is False, name  # Nanotron's own get_logger created it
    assert logger.filters, name
nanotron_root = logging.getLogger("nanotron")
nanotron_root.addHandler(logging.StreamHandler())
from nanotron.logging import set_formatter
set_formatter(logging.Formatter("%(message)s"))
logging.getLogger("nanotron.trainer").warning("one line")
"""


def test_nanotron_records_are_printed_once_when_quieted_before_import():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout + done.stderr).count("one line") == 1, done.stdout + done.stderr


LIBRARY_NOISE = """
import logging
import warnings

import datasets  # its loggers print with a handler of their own

logging.getLogger("datasets.custom_tasks").warning("a record of the datasets logger")
warnings.warn("a Python warning")
TASKS_TABLE = []
"""


USING_THE_CACHE = "Using the latest cached version of the dataset since ai2_arc couldn't be found"


def _console(arguments: list[str], folder: Path) -> str:
    """What `lighteval-nanotron <arguments>` printed (stdout and stderr), offline, in `folder`, whose
    `cache` is its `datasets` cache; the command must succeed."""
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(folder / "cache")}
    env = {**os.environ, **offline, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    command = [sys.executable, "-m", "lighteval_nanotron", *arguments]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.parametrize("verbose", [False, True])
def test_a_librarys_warnings_reach_the_eval_console_once(verbose, tiny_checkpoint, tmp_path):  # noqa: F811
    """`eval` reads ai2_arc from an offline datasets cache entry (datasets warns that it uses it) and a
    custom tasks file logs on the `datasets` logger and warns (shown with --verbose): each once."""
    entry = hub_commit_entry(local_folder_entry(tmp_path / "cache", tmp_path / "hub", {"test": 4}), "e" * 40)
    (tmp_path / "noise.py").write_text(LIBRARY_NOISE)
    console = _console([
        *(["--verbose"] if verbose else []), "eval", str(tiny_checkpoint), "--cpu", "--tasks", "lighteval|arc:easy|0",
        "--custom-tasks", str(tmp_path / "noise.py"), "--max-samples", "2", "--output-dir", str(tmp_path / "out"),
    ], tmp_path)  # fmt: skip
    once = [
        "a record of the datasets logger",
        USING_THE_CACHE,
        f"Found the latest cached dataset configuration 'ARC-Easy' at {entry}",
    ]
    assert {text: console.count(text) for text in once} == dict.fromkeys(once, 1), console[-3000:]
    assert console.count("UserWarning: a Python warning") == (1 if verbose else 0), console[-3000:]  # quiet: off


def test_a_librarys_warnings_reach_the_training_console_once(tmp_path):
    """In training, Nanotron's root handler prints beside `datasets`' own: each warning once."""
    from tests.hook.training_runs import write_config

    entry = hub_commit_entry(local_folder_entry(tmp_path / "cache", tmp_path / "hub", {"test": 4}), "f" * 40)
    config = write_config(tmp_path, section={"tasks": "lighteval|arc:easy|0", "data_dirs": []})
    console = _console(["train", "--config-file", str(config), "--cpu", "--nproc", "1"], tmp_path)
    once = [USING_THE_CACHE, f"Found the latest cached dataset configuration 'ARC-Easy' at {entry}"]
    assert {text: console.count(text) for text in once} == dict.fromkeys(once, 1), console[-3000:]
