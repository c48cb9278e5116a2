"""`lighteval-nanotron eval --held-out NAME=PATH`: domains from jsonl text and a Nanoset folder beside
(or instead of) tasks, and every bad held-out input refused in one `error:` line."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from lighteval_nanotron.tracking import results_files_by_step
from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)
from tests.models.held_out_cases import text_token_documents, write_nanoset, write_text_jsonl

REPO = Path(__file__).resolve().parents[2]
TRAINING_SEQUENCE_LENGTH = 32  # tokens.sequence_length of the tiny checkpoint's config.yaml


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _eval(checkpoint, output: Path, *extra: str, timeout: int = 300) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "lighteval_nanotron",
        "eval",
        str(checkpoint),
        "--cpu",
        "--output-dir",
        str(output),
    ]
    return subprocess.run([*command, *extra], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    folder = tmp_path_factory.mktemp("held_out_sources")
    rng = np.random.default_rng(1)
    documents = [text_token_documents(rng.integers(30, 120, size=10))]
    return write_text_jsonl(folder / "web.jsonl"), write_nanoset(folder / "code", documents), folder


def test_held_out_only_at_the_training_sequence_length(tiny_checkpoint, sources, tmp_path):  # noqa: F811
    text, nanoset, _ = sources
    done = _eval(
        tiny_checkpoint, tmp_path / "out", "--held-out", f"web={text}", "--held-out", f"code={nanoset}",
        "--held-out-tokens", "256",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| heldout|_micro" in done.stdout and "| heldout|code" in done.stdout
    (results_file,) = (tmp_path / "out" / "results").rglob("results_*.json")
    content = json.loads(results_file.read_text())
    assert {"heldout|web", "heldout|code", "heldout|_micro", "heldout|_macro"} <= set(content["results"])
    for key in ("heldout|web", "heldout|code"):
        described = content["config_tasks"][key]
        assert described["sequence_length"] == TRAINING_SEQUENCE_LENGTH
        assert described["target_tokens"] == 256


def _error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-3000:])
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "case",
    ["missing", "empty", "no_text_column", "beyond_vocabulary", "beyond_positions", "bad_option", "short"],
)
def test_bad_held_out_input_is_one_error_line(tiny_checkpoint, sources, tmp_path, case):  # noqa: F811
    text, nanoset, folder = sources
    flags = {
        "missing": ["--held-out", f"web={folder / 'nowhere.jsonl'}"],
        "empty": ["--held-out", f"web={tmp_path / 'empty.jsonl'}"],
        "no_text_column": ["--held-out", f"web={tmp_path / 'other.jsonl'}"],
        "beyond_vocabulary": ["--held-out", f"code={tmp_path / 'wide'}"],
        "beyond_positions": ["--held-out", f"web={text}", "--held-out-sequence-length", "1000"],
        "bad_option": ["--held-out", str(text)],
        "short": ["--held-out", f"code={tmp_path / 'short'}"],
    }[case]
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "other.jsonl").write_text(json.dumps({"content": "no text column here"}) + "\n")
    write_nanoset(tmp_path / "wide", [[list(range(990, 1030)) * 3]])
    write_nanoset(tmp_path / "short", [[[1, 2, 3, 4, 5]]])
    expected = {
        "missing": "does not exist",
        "empty": "is empty",
        "no_text_column": "has no column 'text'",
        "beyond_vocabulary": "does not fit the model's vocabulary of 1024",
        "beyond_positions": "beyond the model's 256 positions",
        "bad_option": "write NAME=PATH",
        "short": "fewer than one window",
    }[case]
    line = _error_line(_eval(tiny_checkpoint, tmp_path / "out", *flags, timeout=120))
    assert expected in line


def _cli_main(argv: list) -> int:
    """run_distributed worker: the CLI's main in this rank."""
    from lighteval_nanotron.cli.main import main

    return main(argv)


def test_a_domain_is_evaluated_again_only_when_its_windows_changed(tiny_checkpoint, sources, tmp_path):  # noqa: F811
    """A step evaluated on a domain's windows, then the domain's file changed: a backfill, then
    `--watch`, evaluate the step's domain again on the new windows (they skipped the step, and the
    curve mixed windows); with the same file they skip it, the results file byte for byte."""
    text, nanoset, _ = sources
    run = tmp_path / "checkpoints"
    shutil.copytree(tiny_checkpoint, run / "10")
    config = yaml.safe_load((run / "10" / "config.yaml").read_text())  # a training whose last checkpoint is 10
    config["tokens"]["train_steps"], config["checkpoints"]["checkpoint_interval"] = 10, 10
    (run / "10" / "config.yaml").write_text(yaml.safe_dump(config))
    web = tmp_path / "web.jsonl"
    shutil.copy(text, web)
    argv = [
        "eval", "--checkpoints-dir", str(run), "--cpu", "--output-dir", str(tmp_path / "out"), "--model-name", "tiny",
        "--held-out", f"web={web}", "--held-out", f"code={nanoset}", "--held-out-tokens", "128",
    ]  # fmt: skip

    def results() -> tuple[bytes, dict]:
        (path,) = results_files_by_step(tmp_path / "out", "tiny").values()
        return path.read_bytes(), json.loads(path.read_bytes())

    assert run_distributed(_cli_main, 1, argv, timeout=180) == [0]
    first_bytes, first = results()
    assert {"heldout|web", "heldout|code", "heldout|_micro", "heldout|_macro"} <= set(first["results"])
    assert run_distributed(_cli_main, 1, argv, timeout=180) == [0]  # the same windows: the step is done
    assert results()[0] == first_bytes

    write_text_jsonl(web, seed=7)  # other text under the same name: other windows
    assert run_distributed(_cli_main, 1, argv, timeout=180) == [0]
    second_bytes, second = results()
    digest = "windows_sha256"
    assert second["config_tasks"]["heldout|web"][digest] != first["config_tasks"]["heldout|web"][digest]
    assert second["results"]["heldout|web"] != first["results"]["heldout|web"]
    assert second["results"]["heldout|code"] == first["results"]["heldout|code"]  # kept, not evaluated again
    assert second["config_tasks"]["heldout|code"] == first["config_tasks"]["heldout|code"]
    # the averages were computed over web's replaced windows: left out, never kept beside the new web
    assert not {"heldout|_micro", "heldout|_macro"} & (set(second["results"]) | set(second["config_tasks"]))

    watch = [*argv, "--watch", "--poll-interval-s", "0.2", "--settle-s", "0", "--no-progress"]
    assert run_distributed(_cli_main, 1, watch, timeout=180) == [0]  # the same windows: skipped, then ends
    assert results()[0] == second_bytes
    write_text_jsonl(web, seed=8)
    assert run_distributed(_cli_main, 1, watch, timeout=180) == [0]
    _, third = results()
    assert third["config_tasks"]["heldout|web"][digest] != second["config_tasks"]["heldout|web"][digest]
