"""Bad held-out input in the training hook: one `error:` line from `train`, exit code 2, before step 1."""

import os
import subprocess
import sys

from lighteval_nanotron.training import run_train
from tests.hook.training_runs import REPO, write_config
from tests.models.held_out_cases import write_nanoset


def _error_lines(text):
    return [line for line in text.splitlines() if line.startswith("error:")]


def test_bad_held_out_entry_is_refused_when_the_config_is_read(tmp_path, capsys):
    config = write_config(tmp_path, tp=2, pp=2, section={"held_out": {"_micro": "/data/x.jsonl"}})
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "4"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "lighteval_nanotron.held_out" in line and "a name is letters" in line


def test_held_out_data_beyond_the_vocabulary_stops_every_rank_before_step_1(tmp_path):
    folder = write_nanoset(tmp_path / "code", [[list(range(1000, 1100))]])
    config = write_config(tmp_path, dp=2, section={"tasks": "", "held_out": {"code": str(folder)}})
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1")
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
    assert "held-out domain 'code'" in lines[0] and "does not fit the model's vocabulary of 1024" in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "checkpoints").exists()


def test_bad_held_out_data_with_asynchronous_evaluation_stops_train_before_any_process(tmp_path, capsys):
    """Launched evaluations build the held-out domains themselves: a Nanoset beyond the vocabulary
    failed every checkpoint's evaluation while training went on, instead of stopping `train`."""
    folder = write_nanoset(tmp_path / "code", [[list(range(1000, 1100))]])
    section = {"held_out": {"code": str(folder)}, "asynchronous": {"launcher": "local", "cpu": True}}
    config = write_config(tmp_path, dp=2, checkpoint_interval=2, section=section)
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "2"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "held-out domain 'code'" in line and "does not fit the model's vocabulary of 1024" in line
    assert not (tmp_path / "checkpoints").exists()
