import json

import pytest
from helpers_tracking import TASK_A, make_result

from lighteval_nanotron.tracking import ResultsJsonLogger, date_id, evaluated_steps, results_path


def test_results_file_has_lighteval_layout_and_training_position(tmp_path, result):
    ResultsJsonLogger(tmp_path).log(result)

    path = tmp_path / "results" / "toy-run" / "100" / f"results_{date_id(result.start_time)}.json"
    content = json.loads(path.read_text())
    assert list(content) == [
        "config_general",
        "results",
        "versions",
        "config_tasks",
        "summary_tasks",
        "summary_general",
    ]
    assert content["results"][TASK_A] == {"acc": 0.5, "acc_stderr": 0.1}
    assert "all" in content["results"]
    general = content["config_general"]
    assert general["training_step"] == 100
    assert general["consumed_tokens"] == 4096
    assert general["config"]["general"]["step"] == 100
    assert general["model_name"] == "toy-run"
    assert general["wall_time_s"] == pytest.approx(1.25)


def test_results_file_without_step_is_named_by_timestamp(tmp_path):
    result = make_result(step=None)
    ResultsJsonLogger(tmp_path).log(result)
    (path,) = (tmp_path / "results" / "toy-run").iterdir()
    assert path.is_file()
    assert path == results_path(tmp_path, result)
    assert path.name.startswith("results_2023-") and ":" not in path.name
    assert evaluated_steps(tmp_path, "toy-run") == set()


def test_failing_serialization_leaves_previous_file_intact(tmp_path):
    logger = ResultsJsonLogger(tmp_path)
    logger.log(make_result(acc=0.25))
    path = logger.last_path
    before = path.read_bytes()

    broken = make_result(acc=0.75)
    broken.results[TASK_A]["acc"] = object()  # not JSON serializable
    with pytest.raises(TypeError):
        logger.log(broken)

    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_failing_write_midway_leaves_previous_file_intact(tmp_path, monkeypatch):
    logger = ResultsJsonLogger(tmp_path)
    logger.log(make_result(acc=0.25))
    path = logger.last_path
    before = path.read_bytes()

    def write_half_then_fail(self, text, encoding=None):
        with open(self, "w", encoding=encoding) as handle:
            handle.write(text[: len(text) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(type(path), "write_text", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        logger.log(make_result(acc=0.75))
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert json.loads(before)["results"][TASK_A]["acc"] == 0.25
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_evaluated_steps_finds_complete_results_only(tmp_path):
    logger = ResultsJsonLogger(tmp_path)
    for step in (0, 50, 100):
        logger.log(make_result(step=step))
    folder = tmp_path / "results" / "toy-run"
    (folder / "150").mkdir()
    (folder / "150" / "results_x.json").write_text('{"config_general": ')  # truncated by hand, not by us
    (folder / "200").mkdir()
    (folder / "200" / ".results_x.json.abc.tmp").write_text("{}")  # a crashed writer's temp file

    assert evaluated_steps(tmp_path, "toy-run") == {0, 50, 100}
    logger.log(make_result(step=50, acc=0.75))  # a later run at a step merges into its one file
    assert [p.name for p in (folder / "50").iterdir()] == [f"results_{date_id(make_result().start_time)}.json"]
    assert evaluated_steps(tmp_path, "other-run") == set()
    assert evaluated_steps(tmp_path / "missing", "toy-run") == set()
