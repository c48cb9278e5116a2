"""`make demo`: trained on real text, accuracy stays at chance while the gold answer's bits per byte
falls beyond its noise on the benchmarks, as the hook's signal says; the files and both PNGs exist."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from lighteval_nanotron.nanotron_compat.variant import shipped_config
from lighteval_nanotron.tracking import results_files_by_step

REPO = Path(__file__).resolve().parents[2]
MODEL = "lighteval_nanotron_demo/real_text_tp2_pp2"


def test_demo_gold_bpb_is_informative_while_accuracy_stays_at_chance(tmp_path):
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
    printed = (done.stdout + done.stderr).splitlines()
    assert len(printed) < 80, "\n".join(printed)  # a newcomer's first command reads on one screen or two
    messages = [line.split("]: ", 1)[-1] for line in printed if line.strip()]
    assert len(messages) == len(set(messages)), "a line printed twice"
    results = results_files_by_step(run_dir / "eval", MODEL)
    config = yaml.safe_load(shipped_config("demo_train.yaml").read_text())  # the installed Nanotron's schema
    steps, interval = config["tokens"]["train_steps"], config["lighteval_nanotron"]["eval_interval"]
    assert sorted(results) == list(range(0, steps + 1, interval))
    last = json.loads(results[steps].read_text())
    signal = last["signal"]["series"]
    tasks = [task for task in last["results"] if task != "all" and ":_average|" not in task]
    informative = [task for task in tasks if signal.get(task, {}).get("gold_bpb", {}).get("verdict") == "informative"]
    at_chance = [task for task in tasks if signal.get(task, {}).get("acc", {}).get("verdict") == "not yet above chance"]
    assert len(set(informative) & set(at_chance)) >= 2, (informative, at_chance)
    first = json.loads(results[0].read_text())["results"]
    assert all(last["results"][task]["gold_bpb"] < first[task]["gold_bpb"] for task in informative)
    curve = [json.loads(results[step].read_text())["results"]["heldout|wikipedia"] for step in sorted(results)]
    assert all(point["loss"] > 0 and point["bits_per_byte"] > 0 for point in curve)  # a held-out loss per step
    assert curve[-1]["loss"] < curve[0]["loss"]  # its validation loss falls (passages never trained on)
    for name in ("overview", "report"):
        image = run_dir / "eval" / "plots" / f"{name}.png"
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"{name.capitalize()} plot: {image}" in done.stdout
    assert "informative" in done.stdout and "not yet above chance" in done.stdout
    # `report` on the demo's output folder: the same verdicts, from the files
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "lighteval_nanotron",
            "report",
            str(run_dir / "eval"),
            "--output",
            str(tmp_path / "r.png"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    for task in informative:
        (row,) = [line for line in report.stdout.splitlines() if line.startswith(f"| {task} ") and " gold_bpb " in line]
        assert row.rstrip(" |").endswith("informative")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    loss = [json.loads(line)["lm_loss"] for line in (run_dir / "eval" / "training" / MODEL / "loss.jsonl").open()]
    assert len(loss) >= 10 and loss[-1] < loss[0]
    assert "API key" not in done.stderr
