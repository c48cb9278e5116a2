"""W&B during training: off unless asked for; when asked, evaluations sit at the training steps."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.distributed import run_distributed
from tests.helpers.wandb_records import read_run
from tests.hook.training_runs import REPO, train_worker, write_config

pytest.importorskip("wandb", reason="the test extras install wandb: Nanotron would start it")


def _fresh_env(home: Path) -> dict:
    """The environment of a new user: no W&B variable, no W&B credentials, no terminal."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return env


def test_readme_train_command_runs_without_wandb_variables(tmp_path):
    config = write_config(tmp_path, tp=2, pp=2, train_steps=2, section={"tasks": "lighteval|piqa|0"})
    command = [sys.executable, "-m", "lighteval_nanotron", "train", "--config-file", str(config), "--cpu"]
    done = subprocess.run(
        [*command, "--nproc", "4"],
        cwd=tmp_path,
        env=_fresh_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [path.parent.name for path in (tmp_path / "eval" / "results").rglob("*.json")] == ["2"]
    assert not (tmp_path / "wandb").exists(), "W&B started although the section does not list it"
    assert "API key" not in done.stderr


def _wandb_worker(config_path: str) -> dict:
    os.environ.pop("WANDB_MODE", None)
    os.environ["WANDB_SILENT"] = "true"
    return train_worker(config_path, wandb_mode=None)


def test_wandb_offline_evaluations_on_the_training_step_axis(tmp_path):
    section = {
        "loggers": ["json", "wandb"],
        "eval_interval": 2,
        "wandb_mode": "offline",
        "wandb_project": "axis-test",
        "wandb_run_name": "axis-run",
        "wandb_tags": "cpu,tiny",
        "wandb_dir": str(tmp_path),
    }
    config = write_config(tmp_path, pp=2, train_steps=6, section=section)
    content = yaml.safe_load(config.read_text())
    content["logging"]["iteration_step_info_interval"] = 3  # Nanotron logs steps 1 and 4 only
    config.write_text(yaml.safe_dump(content))

    reports = run_distributed(_wandb_worker, 2, str(config), timeout=300)
    assert [report["evaluated"] for report in reports] == [[2, 4, 6]] * 2

    files = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, files  # one run: Nanotron's training scalars and the evaluations together
    rows, step_metrics, run = read_run(files[0])
    assert run == {"project": "axis-test", "name": "axis-run", "group": "", "tags": ["cpu", "tiny"]}
    assert step_metrics["eval/*"] == step_metrics["eval_time/*"] == step_metrics["eval_signal/*"] == "train/step"
    assert step_metrics["lm_loss"] == "iteration_step"

    evals = [row for row in rows if "eval/lighteval|piqa|0/acc" in row]
    assert [row["train/step"] for row in evals] == [row["iteration_step"] for row in evals] == [2, 4, 6]
    assert all(row["eval_time/lighteval|piqa|0"] > 0 and row["eval/cost_train_steps"] > 0 for row in evals)
    # the signal across the run, in the same rows: 1, 2, 3 evaluations so far, too few for a verdict
    assert [row["eval_signal/lighteval|piqa|0/acc/verdict_code"] for row in evals] == [0, 0, 0]
    assert all(row["eval_signal/lighteval|piqa|0/acc/trend"] == row["eval/lighteval|piqa|0/acc"] for row in evals[:2])
    tokens_per_step = 2 * 32  # micro_batch_size 2, one accumulation, sequence_length 32
    assert [row["train/consumed_tokens"] for row in evals] == [
        2 * tokens_per_step,
        4 * tokens_per_step,
        6 * tokens_per_step,
    ]
    training = [row for row in rows if "lm_loss" in row]
    assert [row["iteration_step"] for row in training] == [1, 4]
    # W&B's own row counter is not the training step: the declared axis is what lines them up.
    assert [row["_step"] for row in evals] != [2, 4, 6]
