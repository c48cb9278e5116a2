"""`make demo`: the synthetic task climbs from chance, the files and the overview PNG exist."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lighteval_nanotron.nanotron_compat.variant import shipped_config
from lighteval_nanotron.tracking import results_files_by_step

REPO = Path(__file__).resolve().parents[2]
MODEL = "lighteval_nanotron_demo/counting_tp2_pp2"

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_demo_accuracy_rises_and_leaves_its_files(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    run_dir = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py"), "--run-dir", str(run_dir)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = results_files_by_step(run_dir / "eval", MODEL)
    config = yaml.safe_load(shipped_config("demo_train.yaml").read_text())  # the installed Nanotron's schema
    steps, interval = config["tokens"]["train_steps"], config["lighteval_nanotron"]["eval_interval"]
    assert sorted(results) == list(range(0, steps + 1, interval))
    first = json.loads(results[0].read_text())["results"]
    last = json.loads(results[steps].read_text())["results"]
    assert last["custom|counting|0"]["acc"] - first["custom|counting|0"]["acc"] >= 0.5
    assert last["custom|counting_gen|0"]["em"] - first["custom|counting_gen|0"]["em"] >= 0.5
    curve = [json.loads(results[step].read_text())["results"]["heldout|english"] for step in sorted(results)]
    assert all(point["loss"] > 0 and point["bits_per_byte"] > 0 for point in curve)  # a held-out loss per step
    # the model learns counting text, not English: its English loss moves (up, here) while the training loss falls
    assert curve[-1]["loss"] != curve[0]["loss"]
    overview = run_dir / "eval" / "plots" / "overview.png"
    assert overview.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Overview plot: {overview}" in done.stdout
    loss = [json.loads(line)["lm_loss"] for line in (run_dir / "eval" / "training" / MODEL / "loss.jsonl").open()]
    assert len(loss) >= 10 and loss[-1] < loss[0]
    assert "API key" not in done.stderr
