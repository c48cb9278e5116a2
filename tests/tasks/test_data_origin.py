"""Where a task's data came from (`DataOrigin`), and the shipped slice used, with a warning, when no
data dir is set and the Hub cannot give the dataset; with a data dir set, never."""

import logging
import socket

import pytest
from huggingface_hub import constants

from lighteval_nanotron.errors import DatasetLoadError
from lighteval_nanotron.tasks import Registry, set_data_dirs
from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT, ENV_VAR
from lighteval_nanotron.tasks.data_origin import resolved_revision

ARC = "lighteval|arc:easy|0"
OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _task(spec=ARC):
    (task,) = Registry(tasks=spec).load_tasks().values()
    return task


@pytest.fixture
def no_data_dirs(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    set_data_dirs([])
    yield
    set_data_dirs(None)


@pytest.fixture
def unreachable_hub(monkeypatch, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    for name in OFFLINE:
        monkeypatch.delenv(name, raising=False)


def test_a_data_dir_and_the_named_slice_are_recorded_as_such(tmp_path):
    set_data_dirs(["bundled"])
    task = _task()
    task.get_docs(max_samples=500)
    record = task.data_source_record(500)
    assert record["kind"] == "bundled_slice" and record["slice"] and "note" not in record
    assert record["location"] == str(BUNDLED_ROOT / "ai2_arc" / "ARC-Easy")
    assert (record["hf_repo"], record["hf_subset"], record["rows"]) == ("ai2_arc", "ARC-Easy", {"test": 300})
    assert (record["docs_available"], record["max_samples"], record["docs_evaluated"]) == (300, 500, 300)
    assert record["cap_met"] is False and task.config.original_num_docs == 300  # lighteval's key, unchanged
    assert task.data_source_record(100)["cap_met"] is True


@pytest.mark.parametrize("how", ["unreachable", "offline"])
def test_without_a_data_dir_the_slice_is_used_with_a_warning(how, no_data_dirs, unreachable_hub, monkeypatch, caplog):
    if how == "offline":
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", "/nonexistent/hf_cache")
    with caplog.at_level(logging.WARNING):
        docs = _task().get_docs(max_samples=5)
    assert len(docs) == 5
    (warning,) = [r.getMessage() for r in caplog.records if "slice shipped with the package is used" in r.getMessage()]
    why = {"unreachable": "the Hub cannot be reached", "offline": "HF_DATASETS_OFFLINE is set and the"}[how]
    assert warning.startswith(f"Task {ARC}: no data dir is set and {why}")
    assert "(300 rows of test, 50 rows of train), not the full dataset" in warning
    # every way in is named: eval's flag, the hook's key, the Python call, the variable
    settings = (
        "--data-dir, the lighteval_nanotron section's data_dirs, set_data_dirs([...]) or $LIGHTEVAL_NANOTRON_DATA_DIRS"
    )
    assert f"Set the data dirs ({settings}) to `bundled` to choose it" in warning


def test_with_a_data_dir_set_the_slice_is_never_taken_instead(tmp_path, unreachable_hub):
    set_data_dirs([str(tmp_path)])
    with pytest.raises(DatasetLoadError, match="in no data dir.*Hub"):
        _task().get_docs(max_samples=5)


def test_a_dataset_without_a_slice_still_says_what_to_add(no_data_dirs, unreachable_hub):
    from lighteval_nanotron.tasks import LightevalTask, LightevalTaskConfig

    config = LightevalTaskConfig(
        name="absent", prompt_function=lambda line, name: None, hf_repo="org/absent_bench_for_tests",
        hf_subset="main", metrics=[], evaluation_splits=["test"],
    )  # fmt: skip
    fix = r"Fix: point the data dirs \(.*\) at a folder holding org/absent_bench_for_tests/main/<split>.jsonl"
    with pytest.raises(DatasetLoadError, match="in no data dir.*Hub.*" + fix) as error:
        LightevalTask(config).get_docs(max_samples=5)
    assert "=bundled" not in str(error.value)  # no slice of it ships with the package: suggesting one sent users round


def test_a_dataset_with_a_shipped_slice_suggests_it_when_the_data_dirs_lack_it(tmp_path, unreachable_hub):
    set_data_dirs([str(tmp_path)])
    with pytest.raises(DatasetLoadError, match=r"LIGHTEVAL_NANOTRON_DATA_DIRS=bundled"):
        _task().get_docs(max_samples=5)


def test_the_commit_of_a_hub_dataset_is_read_from_its_cache_path():
    class Split:
        cache_files = [{"filename": "/c/datasets/allenai___ai2_arc/ARC-Easy/0.0.0/" + "a" * 40 + "/x.arrow"}]

    assert resolved_revision({"test": Split()}) == "a" * 40
    assert resolved_revision({"test": type("Local", (), {"cache_files": []})()}) is None
