import os
import subprocess
import sys
from pathlib import Path

from lighteval_nanotron.cli.main import main
from tests.tasks.toy_paths import DATA_DIR, TOY_TASKS

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_tasks_list(capsys):
    assert main(["tasks", "list", "--suites", "toy,custom", "--custom-tasks", str(TOY_TASKS)]) == 0
    out = capsys.readouterr().out
    assert "- toy:\n  - toy|toy_mc:train_fs" in out and "custom|toy_gen" in out


def test_tasks_list_of_a_suite_without_tasks_exits_2_naming_the_suites_there_are(capsys):
    assert main(["tasks", "list", "--suites", "toy,tyo", "--custom-tasks", str(TOY_TASKS)]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""  # refused before anything is listed: the error line is all there is
    error = printed.err.strip()
    assert error.startswith("error: no task in suite(s) tyo: the suites with tasks are ")
    listed = error.split("the suites with tasks are ", 1)[1].split(" (", 1)[0].split(", ")
    assert "toy" in listed and "lighteval" in listed and "\n" not in error


def test_tasks_inspect_prints_full_context_choices_and_golds(capsys):
    code = main(
        [
            "tasks",
            "inspect",
            "custom|toy_mc:train_fs|2,toy_gen",
            "--num-docs",
            "2",
            "--custom-tasks",
            str(TOY_TASKS),
            "--data-dir",
            str(DATA_DIR),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "=== custom|toy_mc:train_fs|2: 12 docs;" in out and "=== custom|toy_gen|0: 5 docs;" in out
    assert out.count("--- doc ") == 4
    assert "Answer: green\n\nQuestion: train question" in out  # few-shot examples in the context
    assert "<- gold" in out and "[golds] [' " in out
    assert "[generation] max 16 tokens, stop at ['\\n']" in out


def test_errors_exit_2_with_the_message(capsys):
    code = main(["tasks", "inspect", "custom|toy_mc:trainfs|0", "--custom-tasks", str(TOY_TASKS)])
    assert code == 2
    assert "Did you mean: custom|toy_mc:train_fs" in capsys.readouterr().err


def test_python_dash_m_entry_point():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "lighteval_nanotron", "tasks", "--help"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "inspect" in result.stdout and "list" in result.stdout
