"""Where a task's data came from (`DataOrigin`), and the shipped slice used, with a warning, when no
data dir is set and the Hub cannot give the dataset; with a data dir set, never. A `datasets` cache
entry named like the benchmark is used only when it was built from the Hub's dataset (at the
revision asked), and the record and errors name it."""

import logging
import socket

import datasets
import pytest
from huggingface_hub import constants

from lighteval_nanotron.errors import DatasetLoadError
from lighteval_nanotron.tasks import Registry, set_data_dirs
from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT, ENV_VAR, DatasetSource, load_source
from tests.helpers.datasets_cache import hub_commit_entry, local_folder_entry

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


@pytest.fixture
def offline_cache(tmp_path, unreachable_hub, monkeypatch):
    """An offline process whose `datasets` cache is an empty folder; `datasets` reads its entries by name."""
    cache = tmp_path / "datasets_cache"
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    return cache


def test_a_cache_entry_built_from_a_local_folder_is_never_taken_for_the_hubs_dataset(
    no_data_dirs, offline_cache, tmp_path, caplog
):
    entry = local_folder_entry(offline_cache, tmp_path / "prepared")  # 200 rows of validation, config ARC-Easy
    with caplog.at_level(logging.WARNING):
        task = _task()
        docs = task.get_docs(max_samples=5)
    assert len(docs) == 5 and not any(doc.query.startswith("Question: Local question") for doc in docs)
    record = task.data_source_record(5)
    assert record["kind"] == "bundled_slice" and record["rows"] == {"test": 300} and "cache_entry" not in record
    refused = f"the datasets cache entry that `datasets` read for it, {entry}, was built from a local folder"
    assert refused in record["note"] and "name it in the data dirs: ai2_arc=FOLDER" in record["note"]
    (warning,) = [r.getMessage() for r in caplog.records if "slice shipped with the package is used" in r.getMessage()]
    assert warning.startswith(f"Task {ARC}: no data dir is set and {refused}")


def test_with_a_data_dir_set_the_error_names_the_local_folders_cache_entry(offline_cache, tmp_path):
    entry = local_folder_entry(offline_cache, tmp_path / "prepared")
    set_data_dirs([str(tmp_path / "prepared_elsewhere")])
    (tmp_path / "prepared_elsewhere").mkdir()
    with pytest.raises(DatasetLoadError) as error:
        _task().get_docs(max_samples=5)
    message = str(error.value)
    assert message.startswith(f"Task {ARC!r}: cannot load dataset 'ai2_arc' subset 'ARC-Easy': the datasets cache")
    assert f"{entry}, was built from a local folder of that name, not from the Hub's dataset: it is not used" in message
    assert f"the datasets cache entry {entry} (not used)" in message  # in what was tried


def test_a_hub_cache_entry_is_used_and_recorded_with_its_commit_and_path(no_data_dirs, offline_cache, tmp_path):
    commit = "a" * 40
    entry = hub_commit_entry(local_folder_entry(offline_cache, tmp_path / "hub", {"test": 12}), commit)
    task = _task()
    docs = task.get_docs(max_samples=5)
    assert len(docs) == 5 and all(doc.query.startswith("Question: Local question") for doc in docs)
    record = task.data_source_record(5)
    assert (record["kind"], record["location"], record["rows"]) == ("hub_cache", "ai2_arc", {"test": 12})
    assert (record["cache_entry"], record["revision"], record["resolved_revision"]) == (str(entry), "main", commit)
    assert record["slice"] is False and "note" not in record


def test_an_error_about_rows_from_a_cache_entry_names_the_entry(no_data_dirs, offline_cache, tmp_path):
    entry = hub_commit_entry(local_folder_entry(offline_cache, tmp_path / "hub", {"validation": 3}), "b" * 40)
    with pytest.raises(DatasetLoadError) as error:
        _task().get_docs(max_samples=5)
    assert "split 'test' is not in dataset 'ai2_arc' subset 'ARC-Easy' (available: ['validation']; read from the " \
        f"Hugging Face cache (offline): ai2_arc at commit {'b' * 40}, datasets cache entry {entry})" in str(error.value)


def test_a_cache_entry_of_another_commit_than_the_one_asked_is_not_used(offline_cache, tmp_path):
    entry = hub_commit_entry(local_folder_entry(offline_cache, tmp_path / "hub", {"test": 3}), "c" * 40)
    source = DatasetSource("t", "ai2_arc", "ARC-Easy", "d" * 40, data_dirs=(str(tmp_path),))
    with pytest.raises(DatasetLoadError, match=f"read for it, {entry}, holds commit c+, not d+"):
        load_source(source)
