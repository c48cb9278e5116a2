import gzip
import json

import pytest

from lighteval_nanotron.errors import DatasetLoadError
from lighteval_nanotron.tasks import LightevalTask, LightevalTaskConfig, get_data_dirs, set_data_dirs
from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT, candidate_locations

ROWS = [{"question": f"q{i}", "choices": ["a", "b"], "answer_index": i % 2, "label": "AB"[i % 2]} for i in range(4)]


def _prompt(line, task_name):
    from lighteval_nanotron.tasks import Doc

    return Doc(query=line["question"], choices=line["choices"], gold_index=line["answer_index"])


def _task(hf_repo="org/bench", hf_subset="main", splits=("test",)):
    config = LightevalTaskConfig(
        name="bench",
        prompt_function=_prompt,
        hf_repo=hf_repo,
        hf_subset=hf_subset,
        metrics=[],
        hf_avail_splits=list(splits),
        evaluation_splits=list(splits),
    )
    return LightevalTask(config)


def _write_jsonl(path, rows, gz=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if gz else open
    with opener(path, "wt") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def test_env_var_and_setter(monkeypatch, tmp_path):
    set_data_dirs(None)
    monkeypatch.setenv("LIGHTEVAL_NANOTRON_DATA_DIRS", f"{tmp_path}:bundled::org/x={tmp_path}")
    assert get_data_dirs() == [str(tmp_path), "bundled", f"org/x={tmp_path}"]
    set_data_dirs(["a", tmp_path])
    assert get_data_dirs() == ["a", str(tmp_path)]


def test_candidate_locations_follow_entry_order(tmp_path):
    entries = (str(tmp_path / "one"), "bundled", f"org/bench={tmp_path / 'mapped'}", f"org/other={tmp_path}")
    assert candidate_locations("org/bench", "main", entries) == [
        tmp_path / "one" / "org/bench" / "main",
        BUNDLED_ROOT / "org/bench" / "main",
        tmp_path / "mapped",
    ]
    assert candidate_locations("org/bench", None, (str(tmp_path),)) == [tmp_path / "org/bench" / "default"]
    assert BUNDLED_ROOT.parts[-3:] == ("lighteval_nanotron", "bundled_data", "slices")


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "parquet", "save_to_disk"])
def test_split_file_formats(tmp_path, kind):
    from datasets import Dataset

    folder = tmp_path / "org/bench/main"
    if kind == "jsonl":
        _write_jsonl(folder / "test.jsonl", ROWS)
    elif kind == "jsonl.gz":
        _write_jsonl(folder / "test.jsonl.gz", ROWS, gz=True)
    elif kind == "parquet":
        folder.mkdir(parents=True)
        Dataset.from_list(ROWS).to_parquet(str(folder / "test.parquet"))
    else:
        Dataset.from_list(ROWS).save_to_disk(str(folder / "test"))
    set_data_dirs([str(tmp_path)])
    docs = _task().eval_docs()
    assert [d.query for d in docs] == ["q0", "q1", "q2", "q3"]


def test_first_matching_data_dir_wins(tmp_path):
    _write_jsonl(tmp_path / "a/org/bench/main/test.jsonl", ROWS[:1])
    _write_jsonl(tmp_path / "b/org/bench/main/test.jsonl", ROWS)
    (tmp_path / "empty").mkdir()  # a data dir without this dataset is passed over (one that does not exist is an error)
    set_data_dirs([str(tmp_path / "empty"), str(tmp_path / "a"), str(tmp_path / "b")])
    assert len(_task().eval_docs()) == 1


def test_repo_mapping_entry(tmp_path):
    _write_jsonl(tmp_path / "copy/main/test.jsonl", ROWS)
    set_data_dirs([f"org/bench={tmp_path / 'copy'}"])
    assert len(_task().eval_docs()) == 4


def test_repo_mapping_to_a_plain_dataset_folder(tmp_path):
    _write_jsonl(tmp_path / "copy/data/test.jsonl", ROWS)  # a repo copy that datasets reads itself
    set_data_dirs([f"org/bench={tmp_path / 'copy'}"])
    assert len(_task(hf_subset=None).eval_docs()) == 4


def test_hf_repo_may_be_a_local_folder(tmp_path):
    _write_jsonl(tmp_path / "local_bench/main/test.jsonl", ROWS)
    set_data_dirs([])
    assert len(_task(hf_repo=str(tmp_path / "local_bench")).eval_docs()) == 4


def test_missing_dataset_names_task_tries_and_fix(tmp_path):
    set_data_dirs([str(tmp_path)])
    with pytest.raises(DatasetLoadError) as info:
        _task(hf_repo="org/absent_bench_for_tests").eval_docs()
    message = str(info.value)
    assert "custom|bench|0" in message and "org/absent_bench_for_tests" in message
    assert str(tmp_path / "org/absent_bench_for_tests" / "main") in message
    assert "=bundled" not in message  # no slice of it ships with the package: not suggested


def test_missing_split_lists_available_ones(tmp_path):
    _write_jsonl(tmp_path / "org/bench/main/train.jsonl", ROWS)
    set_data_dirs([str(tmp_path)])
    with pytest.raises(DatasetLoadError, match="split 'test'.*'org/bench'.*\\['train'\\]"):
        _task().eval_docs()


def test_missing_subset_reports_the_subset_folder(tmp_path):
    _write_jsonl(tmp_path / "org/bench/main/test.jsonl", ROWS)
    set_data_dirs([str(tmp_path)])
    with pytest.raises(DatasetLoadError, match="subset 'other'"):
        _task(hf_subset="other").eval_docs()


HUB_README = """---
license: mit
configs:
- config_name: main
  data_files:
  - split: validation
    path: data/validation-00000-of-00001.parquet
  - split: test
    path: data/test-00000-of-00001.parquet
---
# A benchmark, as `huggingface-cli download --repo-type dataset` leaves it
"""


def _hub_copy(folder, rows=ROWS):
    from datasets import Dataset

    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text(HUB_README)
    Dataset.from_list(rows[:3]).to_parquet(str(folder / "data" / "validation-00000-of-00001.parquet"))
    Dataset.from_list(rows).to_parquet(str(folder / "data" / "test-00000-of-00001.parquet"))
    return folder


def test_repo_mapping_to_a_hub_style_copy_reads_the_declared_splits(tmp_path):
    set_data_dirs([f"org/bench={_hub_copy(tmp_path / 'copy')}"])
    assert len(_task(splits=("validation",)).eval_docs()) == 3
    assert len(_task(splits=("test",)).eval_docs()) == 4


def test_hub_shard_names_are_split_names(tmp_path):
    from datasets import Dataset

    folder = tmp_path / "org/bench/main"
    folder.mkdir(parents=True)
    Dataset.from_list(ROWS[:1]).to_parquet(str(folder / "validation-00000-of-00001.parquet"))
    Dataset.from_list(ROWS[:2]).to_parquet(str(folder / "test-00000-of-00002.parquet"))
    Dataset.from_list(ROWS[2:]).to_parquet(str(folder / "test-00001-of-00002.parquet"))
    set_data_dirs([str(tmp_path)])
    assert len(_task(splits=("validation",)).eval_docs()) == 1
    assert [doc.query for doc in _task().eval_docs()] == ["q0", "q1", "q2", "q3"]


def test_mapping_to_a_missing_folder_fails_at_once(tmp_path):
    set_data_dirs([f"org/bench={tmp_path / 'not_downloaded'}"])
    with pytest.raises(DatasetLoadError, match="folder that does not exist"):
        _task().eval_docs()


def test_unreachable_hub_fails_at_once_without_the_cache(tmp_path, monkeypatch):
    import socket
    import time

    from huggingface_hub import constants

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    set_data_dirs([str(tmp_path)])
    started = time.perf_counter()
    with pytest.raises(DatasetLoadError, match="in no data dir.*Hub") as info:
        _task(hf_repo="org/absent_bench_for_tests").eval_docs()
    assert time.perf_counter() - started < 10  # one connection attempt, not the Hub client's retries
    assert str(tmp_path / "org/absent_bench_for_tests" / "main") in str(info.value)
    assert "HF_DATASETS_OFFLINE=1" in str(info.value)


@pytest.mark.parametrize("entry", ["root", "mapping", "file"])
def test_a_data_dir_that_does_not_exist_is_named_and_nothing_is_looked_up_by_name(tmp_path, monkeypatch, entry):
    """Even with the data in a later data dir and the Hugging Face cache allowed (offline mode)."""
    _write_jsonl(tmp_path / "good" / "org/bench" / "main" / "test.jsonl", ROWS)
    (tmp_path / "a_file").write_text("x")
    wrong = {
        "root": str(tmp_path / "typo"),
        "mapping": f"org/bench={tmp_path / 'typo'}",
        "file": str(tmp_path / "a_file"),
    }
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    set_data_dirs([wrong[entry], str(tmp_path / "good")])
    with pytest.raises(DatasetLoadError) as info:
        _task().eval_docs()
    message = str(info.value)
    assert "fix that path or remove the entry" in message and "not looked up by name" in message
    assert ("is not a folder" if entry == "file" else "does not exist") in message
    assert str(tmp_path / ("a_file" if entry == "file" else "typo")) in message
    set_data_dirs([str(tmp_path / "good")])
    assert len(_task().eval_docs()) == 4


@pytest.mark.parametrize("entry", ["org/bench=", "=DATA", " = "])
def test_a_mapping_entry_without_a_repo_or_a_path_is_refused(tmp_path, monkeypatch, entry):
    """`org/bench=` read the working directory as the dataset folder (Path("") is "."): its
    `test.jsonl` was evaluated."""
    _write_jsonl(tmp_path / "test.jsonl", ROWS)
    monkeypatch.chdir(tmp_path)
    set_data_dirs([entry.replace("DATA", str(tmp_path))])
    with pytest.raises(DatasetLoadError, match=r"not HF_REPO=PATH"):
        _task().eval_docs()


def test_jsonl_rows_with_a_byte_order_mark_and_a_broken_line(tmp_path):
    path = tmp_path / "org/bench" / "main" / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8-sig")
    set_data_dirs([str(tmp_path)])
    assert [doc.query for doc in _task().eval_docs()] == ["q0", "q1", "q2", "q3"]
    path.write_text(json.dumps(ROWS[0]) + "\n{cut short\n")
    with pytest.raises(DatasetLoadError, match=r"test.jsonl, line 2: not a JSON row"):
        _task().eval_docs()


@pytest.mark.parametrize(
    "change, words",
    [
        ({"choices": "ab"}, "field 'choices' is a list on line 1 and a string on line 3"),  # read per character
        ({"answer_index": "1"}, "field 'answer_index' is a number on line 1 and a string on line 3"),
        ({"choices": ["a", 2]}, "field 'choices\\[\\]' is a string on line 1 and a number on line 3"),
        ({"answer_index": True}, "field 'answer_index' is a number on line 1 and true/false on line 3"),
    ],
)
def test_a_jsonl_field_of_two_types_is_named_with_its_lines(tmp_path, change, words):
    """Arrow stopped such a file with 'ArrowInvalid: cannot mix list and non-list' (no file, no row), or, for a
    list of choices given as a string in every row, the prompt iterated it one character a choice."""
    path = tmp_path / "org/bench" / "main" / "test.jsonl"
    _write_jsonl(path, [*ROWS[:2], {**ROWS[2], **change}, ROWS[3]])
    set_data_dirs([str(tmp_path)])
    with pytest.raises(DatasetLoadError, match=f"test.jsonl: {words}: .*one type"):
        _task().eval_docs()
    path.write_text("[1, 2]\n")
    with pytest.raises(DatasetLoadError, match=r"test.jsonl, line 1: '\[1, 2\]' .*JSON object"):
        _task().eval_docs()
