"""Demo: a real Nanotron training run on CPU whose in-loop evaluation shows the model learning.

Usage (from the repository root):
    make demo
    # which runs:
    OMP_NUM_THREADS=1 .venv/bin/python examples/demo.py [--run-dir runs/demo]

It trains the tiny Llama of configs/demo_train.yaml (configs/nanotron_main/ under current Nanotron)
with Nanotron's DistributedTrainer on 4 CPU processes (gloo, TP2 x PP2) for 60 steps, on the text of
a synthetic counting task (examples/counting_task.py: digits counting up, letters counting down). The config's
`lighteval_nanotron:` section evaluates the live, sharded model at steps 0, 10, ..., 60 on that
task (log-likelihood over 4 choices, and a generative variant scored by exact match), which
climbs from chance to about 1, and on three real benchmarks shipped with the package (arc:easy,
piqa, hellaswag), which a model this small leaves at chance. Then it prints the results table and
writes one overview PNG: per task its metric against the training step, with the stderr band and
the chance level, and the training loss beside them. Everything lands in the run folder:

    eval/results/<project>/<run>/<step>/results_<date>.json   lighteval-format results, with step and tokens
    eval/details/<project>/<run>/<step>/<date>/*.parquet      per-sample details
    eval/training/<project>/<run>/loss.jsonl           the training loss at Nanotron's logging interval
    eval/tensorboard/                                  `eval/<task>/<metric>` scalars
    eval/plots/overview.png                            the overview image
    eval/plots/<metric>/<task>.png                     one image per metric and task
    checkpoints/                                       Nanotron checkpoints (steps 30 and 60)

A previous run folder is removed first (otherwise the hook would skip the steps it finds there).
"""

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG_NAME = "demo_train.yaml"  # configs/ for Nanotron 0.4, configs/nanotron_main/ for GitHub main
NPROC = 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/demo"), help="where the run's files go")
    args = parser.parse_args(argv)
    os.chdir(REPO)  # the config's paths are relative to the repository root
    sys.path[:0] = [str(REPO), str(REPO / "examples")]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    from lighteval_nanotron.hook.run_train import launch_cpu

    run_dir = args.run_dir.resolve()
    if run_dir.exists():
        print(f"Removing the previous run in {run_dir}")
        shutil.rmtree(run_dir)
    config_path = write_config(run_dir)
    config = yaml.safe_load(config_path.read_text())
    section, parallelism = config["lighteval_nanotron"], config["parallelism"]
    print(
        f"Training {config['general']['project']}/{config['general']['run']} for {config['tokens']['train_steps']} "
        f"steps on {NPROC} CPU processes (TP{parallelism['tp']} x PP{parallelism['pp']} x DP{parallelism['dp']}), "
        f"evaluating {section['tasks']}",
        flush=True,
    )
    started = time.perf_counter()
    launch_cpu(str(config_path), nproc=NPROC)
    elapsed = time.perf_counter() - started

    output_dir = Path(section["output_dir"])
    model_name = f"{config['general']['project']}/{config['general']['run']}"
    overview = plot(output_dir, model_name)
    print_summary(output_dir, model_name, elapsed, overview)
    return 0


def write_config(run_dir: Path) -> Path:
    """The installed Nanotron's demo_train.yaml with its outputs under `run_dir` (written there as train.yaml)."""
    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    config = yaml.safe_load(shipped_config(CONFIG_NAME).read_text())
    config["checkpoints"]["checkpoints_path"] = str(run_dir / "checkpoints")
    config["lighteval_nanotron"]["output_dir"] = str(run_dir / "eval")
    run_dir.mkdir(parents=True)
    path = run_dir / "train.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def plot(output_dir: Path, model_name: str) -> Path:
    """The overview PNG, plus one PNG per (metric, task); returns the overview's path."""
    from counting_task import CHANCE

    from lighteval_nanotron.tracking.overview_plot import plot_overview
    from lighteval_nanotron.tracking.plot import load_history, plot_history

    history = load_history(output_dir / "results")
    metrics = sorted({metric for tasks in history.values() for scores in tasks.values() for metric in scores})
    for metric in metrics:
        plot_history(history, output_dir / "plots" / metric, metrics=[metric])
    return plot_overview(output_dir, model_name, chance=CHANCE)


def print_summary(output_dir: Path, model_name: str, elapsed: float, overview: Path) -> None:
    from lighteval_nanotron.tracking import format_results_table
    from lighteval_nanotron.tracking.paths import results_dir, results_files_by_step

    files = results_files_by_step(output_dir, model_name)
    runs = [json.loads(files[step].read_text()) for step in sorted(files)]
    steps = [content["config_general"]["training_step"] for content in runs]
    print(f"\nTraining + evaluation took {elapsed:.0f}s; evaluated at steps {steps}.")
    if not runs:
        return
    first, last = runs[0], runs[-1]
    print(f"\nResults at step {last['config_general']['training_step']}:\n" + format_results_table(last["results"]))
    print("\nFirst -> last evaluation:")
    for task, scores in last["results"].items():
        if task == "all":
            continue
        metric = next(name for name in scores if not name.endswith("_stderr"))
        before = first["results"].get(task, {}).get(metric, float("nan"))
        print(f"  {task:<28} {metric:<4} {before:.2f} -> {scores[metric]:.2f}")
    print(f"\nResults: {results_dir(output_dir, model_name)}")
    print(f"TensorBoard: tensorboard --logdir {output_dir / 'tensorboard'}")
    print(f"Overview plot: {overview}")


if __name__ == "__main__":
    sys.exit(main())
