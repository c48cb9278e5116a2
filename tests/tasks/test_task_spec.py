import pytest

from lighteval_nanotron.errors import TaskSpecError
from lighteval_nanotron.tasks.spec import TaskSpec, parse_task_spec, read_task_list


@pytest.mark.parametrize(
    "text, expected",
    [
        ("lighteval|arc:easy|5", TaskSpec(task="arc:easy", suite="lighteval", num_fewshots=5)),
        ("arc:easy|3", TaskSpec(task="arc:easy", num_fewshots=3)),
        ("arc:easy", TaskSpec(task="arc:easy")),
        (" lighteval|arc:easy ", TaskSpec(task="arc:easy", suite="lighteval")),
        ("gsm8k@k=5@name=x|2", TaskSpec(task="gsm8k", num_fewshots=2, metric_params={"k": 5, "name": "x"})),
        ("lighteval|gsm8k@k=5|0", TaskSpec(task="gsm8k", suite="lighteval", metric_params={"k": 5})),
    ],
)
def test_parse_forms(text, expected):
    spec = parse_task_spec(text, known_suites=["lighteval"])
    assert (spec.task, spec.suite, spec.num_fewshots, spec.metric_params) == (
        expected.task,
        expected.suite,
        expected.num_fewshots,
        expected.metric_params,
    )


def test_four_part_form_is_deprecated_but_accepted():
    with pytest.warns(FutureWarning, match="deprecated"):
        spec = parse_task_spec("leaderboard|arc:challenge|25|1")
    assert (spec.suite, spec.task, spec.num_fewshots, spec.truncate_fewshots) == (
        "leaderboard",
        "arc:challenge",
        25,
        True,
    )


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "Empty"),
        ("a|b|c|d|e", "5"),
        ("lighteval|arc|x", "integer"),
        ("lighteval|arc|-1", ">= 0"),
        ("lighteval|arc|0_5", "integer, got '0_5'"),  # int() read it as 5
        ("lighteval|arc|+1", "integer, got '\\+1'"),
        ("lighteval|arc|\u0663", "integer, got '\u0663'"),  # an Arabic-Indic 3, which int() reads as 3
        ("lighteval|arc|1.0", "integer, got '1.0'"),
        ("leaderboard|arc|25|2", "truncate flag .*got '2'"),  # was read as true
        ("lighteval||0", "empty part"),
        ("arc@k|0", "task@name=value"),
        ("unknownsuite|arc", "integer"),
    ],
)
def test_malformed_specs(text, fragment):
    with pytest.raises(TaskSpecError, match=fragment):
        parse_task_spec(text, known_suites=["lighteval"])


def test_read_task_list_from_string_list_and_file(tmp_path):
    assert read_task_list("a|0, b|1,,") == ["a|0", "b|1"]
    assert read_task_list(["a|0,b|1", "c"]) == ["a|0", "b|1", "c"]
    # a YAML block (`tasks: |`), one spec a line, was one spec of 5 parts
    assert read_task_list("arc:easy|0\npiqa|0,b|1\n") == ["arc:easy|0", "piqa|0", "b|1"]
    path = tmp_path / "tasks.txt"
    path.write_text("# header\n\nlighteval|a|0  # why\n  b|1,c|2\n#x|1\n")
    assert read_task_list(str(path)) == ["lighteval|a|0", "b|1", "c|2"]
    assert read_task_list(path) == ["lighteval|a|0", "b|1", "c|2"]
    with pytest.raises(TaskSpecError, match="does not exist"):
        read_task_list(tmp_path / "missing.txt")
    # the command line's `--tasks tasks.txt` with no such file: named as a missing file, not an unknown task
    with pytest.raises(TaskSpecError, match=r"'tasks\.txt' does not exist"):
        read_task_list("tasks.txt")


def test_a_byte_order_mark_in_a_tasks_file_is_not_part_of_the_first_spec(tmp_path):
    path = tmp_path / "tasks.txt"
    path.write_text("lighteval|arc:easy|0\nlighteval|piqa|0\n", encoding="utf-8-sig")  # as Notepad saves it
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert read_task_list(str(path)) == ["lighteval|arc:easy|0", "lighteval|piqa|0"]
    assert parse_task_spec(read_task_list(path)[0]).suite == "lighteval"
