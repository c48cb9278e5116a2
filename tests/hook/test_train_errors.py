"""`train` with a bad config: one `error:` line naming the problem and the fix, exit code 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from lighteval_nanotron.nanotron_compat.variant import CONFIG_FOLDERS, installed_nanotron
from lighteval_nanotron.training import run_train
from tests.hook.training_runs import REPO, write_config


def _edit(path, change):
    content = yaml.safe_load(path.read_text())
    change(content)
    path.write_text(yaml.safe_dump(content))
    return path


def _error_lines(text):
    return [line for line in text.splitlines() if line.startswith("error:")]


CASES = {
    "bad lighteval_nanotron value": (
        lambda c: c["lighteval_nanotron"].update(eval_interval=0),
        ["lighteval_nanotron.eval_interval is 0", "positive integer"],
    ),
    "bad lighteval_nanotron type": (
        lambda c: c["lighteval_nanotron"].update(max_samples="lots"),
        ["max_samples", "lots"],
    ),
    "misspelled section key": (
        lambda c: c["lighteval_nanotron"].update(eval_intervall=2),
        ["unknown key 'lighteval_nanotron.eval_intervall'", "did you mean 'eval_interval'?"],
    ),
    "misspelled Nanotron key": (
        lambda c: c["tokens"].update(train_step=5),
        ["unknown key 'tokens.train_step'", "did you mean 'train_steps'?"],
    ),
    "unknown section": (
        lambda c: c.update(lighteval_nanotrn=c.pop("lighteval_nanotron")),
        ["unknown key 'lighteval_nanotrn'", "did you mean 'lighteval_nanotron'?"],
    ),
    "Nanotron's own check": (
        lambda c: c["parallelism"].update(tp_mode="SOMETIMES"),
        ["not a valid Nanotron config", "SOMETIMES"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_config_is_one_error_line_and_exit_2(tmp_path, capsys, case):
    change, words = CASES[case]
    config = _edit(write_config(tmp_path, tp=2, pp=2), change)
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "4"]) == 2
    err = capsys.readouterr().err
    lines = _error_lines(err)
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "eval").exists()


def test_config_of_the_other_nanotron_is_named_with_the_one_to_use(capsys):
    installed = installed_nanotron().name
    (other,) = [name for name in CONFIG_FOLDERS if name != installed]
    config = REPO / CONFIG_FOLDERS[other] / "tiny_cpu_train.yaml"
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "4"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert f"is written for {'Nanotron 0.4' if other == '0.4' else 'current Nanotron'}" in line, line
    assert f"start from {CONFIG_FOLDERS[installed] / 'tiny_cpu_train.yaml'}" in line, line


def test_layout_not_matching_the_process_count(tmp_path, capsys, monkeypatch):
    config = write_config(tmp_path, tp=2, pp=2)
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "2"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "tp=2 x pp=2 x dp=1 needs 4 processes but 2 are started" in line and "--nproc 4" in line
    # under torchrun: WORLD_SIZE is the process count, and only world rank 0 prints
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "3")
    assert run_train.main(["--config-file", str(config), "--cpu"]) == 2
    assert _error_lines(capsys.readouterr().err) == []
    monkeypatch.setenv("RANK", "0")
    assert run_train.main(["--config-file", str(config), "--cpu"]) == 2
    assert "needs 4 processes but 8 are started" in _error_lines(capsys.readouterr().err)[0]


LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def no_launcher(monkeypatch):
    for name in (*LAUNCH_VARIABLES, "SLURM_PROCID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)


def test_no_launcher_for_a_multi_process_config_names_both_ways_to_start_it(tmp_path, capsys, no_launcher):
    config = write_config(tmp_path, tp=2, pp=2)
    assert run_train.main(["--config-file", str(config), "--cpu"]) == 2
    err = capsys.readouterr().err
    (line,) = _error_lines(err)
    assert "parallelism needs 4 processes and no launcher started them" in line, line
    assert f"`lighteval-nanotron train --config-file {config} --cpu --nproc 4` on CPU" in line
    # the README's launcher: a failure of the job is its one error line, without torchrun's report
    assert f"`lighteval-nanotron torchrun --nproc-per-node 4 train --config-file {config}` on GPUs" in line
    assert "WORLD_SIZE" not in err and "Traceback" not in err


def test_nproc_under_a_launcher_is_refused(tmp_path, capsys, no_launcher, monkeypatch):
    config = write_config(tmp_path, tp=2, pp=2)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "4"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "--nproc starts the processes itself" in line and "drop --nproc under torchrun or srun" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message of a machine without CUDA devices")
def test_a_gpu_config_without_a_cuda_device_is_one_line_under_torchrun(tmp_path):
    """torchrun, 2 processes, no --cpu, no GPU: every rank finds it before touching CUDA; world rank 0
    prints it (the other waits for it to), not each rank's `_cuda_setDevice` traceback."""
    config = write_config(tmp_path, tp=2)
    env = {key: value for key, value in os.environ.items() if key not in LAUNCH_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "lighteval_nanotron", "train",
         "--config-file", str(config)],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0
    lines = _error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("error: No CUDA device is visible") and "add --cpu" in lines[0]
    assert f"--config-file {config} --cpu --nproc 2" in lines[0]
    assert "_cuda_setDevice" not in done.stderr and "AttributeError" not in done.stderr


def test_a_misspelt_task_is_reported_before_any_process_starts(tmp_path, capsys, no_launcher, monkeypatch):
    config = write_config(tmp_path, tp=2, pp=2, section={"tasks": "lighteval|arc:eazy|0"})

    def must_not_start(*args, **kwargs):
        raise AssertionError("the training processes were started")

    monkeypatch.setattr(run_train, "launch_cpu", must_not_start)
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "4"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "Unknown task 'lighteval|arc:eazy'" in line and "Did you mean: lighteval|arc:easy" in line
    from lighteval_nanotron.tasks import data_dirs as data_dirs_module

    assert data_dirs_module._data_dirs is None  # the launcher's check left this process's data dirs alone


def test_a_training_tokenizer_that_resolves_nowhere_is_reported_before_any_process_starts(
    tmp_path, capsys, no_launcher, monkeypatch
):
    config = _edit(
        write_config(tmp_path, tp=2, pp=2), lambda c: c["tokenizer"].update(tokenizer_name_or_path=str(tmp_path / "x"))
    )
    monkeypatch.setattr(run_train, "launch_cpu", lambda *args, **kwargs: pytest.fail("processes were started"))
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "4"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert f"The tokenizer folder {tmp_path / 'x'} does not exist" in line
    assert "Set tokenizer.tokenizer_name_or_path in the training config to a folder" in line


def test_error_raised_on_the_ranks_is_printed_once(tmp_path):
    """A task whose dataset is in no data dir fails on every spawned rank: one line, exit 2, no traceback."""
    (tmp_path / "no_data").mkdir()
    section = {"tasks": "lighteval|arc:easy|0", "data_dirs": [str(tmp_path / "no_data")]}
    config = write_config(tmp_path, dp=2, section=section)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "lighteval_nanotron", "train", "--config-file", str(config), "--cpu", "--nproc", "2"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    lines = _error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    assert "cannot load dataset 'ai2_arc'" in lines[0] and "could not prepare its evaluation" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_rank_killed_during_training_is_one_error_line_and_written_results_are_kept(tmp_path):
    """`train --cpu --nproc 2`: the reporting rank is SIGKILLed at the second evaluation (as the
    out-of-memory killer would): one summarized `error:` line, exit 1, no traceback; the first
    evaluation's results file is intact."""
    from tests.hook import failing_tasks

    section = {
        "tasks": "custom|toy_killing|0",
        "custom_tasks": failing_tasks.__file__,
        "data_dirs": [str(failing_tasks.write_data(tmp_path / "data"))],
        "eval_interval": 1,
    }
    config = write_config(tmp_path, dp=2, train_steps=2, section=section)
    output = yaml.safe_load(config.read_text())["lighteval_nanotron"]["output_dir"]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", KILL_WHEN_RESULTS_IN=str(output))
    done = subprocess.run(
        [sys.executable, "-m", "lighteval_nanotron", "train", "--config-file", str(config), "--cpu", "--nproc", "2"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = _error_lines(done.stderr)
    assert "training rank 0" in line and "was killed by SIGKILL" in line and "other ranks were stopped" in line
    assert "Traceback" not in done.stderr and done.stderr.rstrip().splitlines()[-1] == line  # the last line
    (written,) = (Path(output) / "results").rglob("results_*.json")
    assert written.parent.name == "1" and "custom|toy_killing|0" in json.loads(written.read_text())["results"]
