"""Demo: a real Nanotron training run on CPU, evaluated on benchmarks while it trains.

Usage (from the repository root):
    make demo
    # which runs:
    OMP_NUM_THREADS=1 .venv/bin/python examples/demo.py

It trains the tiny Llama of configs/tiny_cpu_train.yaml with Nanotron's DistributedTrainer on 4
CPU processes (gloo, TP2 x PP2) for 60 steps. The config's `lighteval_nanotron:` section evaluates
the live, sharded model on the benchmark slices shipped with the package (arc:easy, piqa,
hellaswag; 100 docs each) at steps 0, 20, 40 and 60, on the trainer's own process groups. Then it
plots each metric against the training step. Everything lands in runs/tiny_cpu/:

    eval/results/<project>/<run>/results_<step>.json   lighteval-format results, with step and tokens
    eval/details/<project>/<run>/<step>/*.parquet      per-sample details
    eval/tensorboard/                                  `eval/<task>/<metric>` scalars
    eval/plots/<metric>/<task>.png                     metric vs step
    checkpoints/                                       Nanotron checkpoints (steps 30 and 60)

A previous runs/tiny_cpu/ is removed first (otherwise the hook would skip steps it finds there).
"""

import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "tiny_cpu_train.yaml"
NPROC = 4


def main() -> int:
    os.chdir(REPO)  # the config's paths are relative to the repository root
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    from lighteval_nanotron.hook.run_train import launch_cpu
    from lighteval_nanotron.hook.training_config import load_training_config

    config = load_training_config(str(CONFIG))
    section = config.lighteval_nanotron
    run_dir = Path(section.output_dir).parent
    if run_dir.exists():
        print(f"Removing the previous run in {run_dir}")
        shutil.rmtree(run_dir)

    started = time.perf_counter()
    print(
        f"Training {config.general.project}/{config.general.run} on {NPROC} CPU processes "
        f"(TP{config.parallelism.tp} x PP{config.parallelism.pp} x DP{config.parallelism.dp}), "
        f"evaluating {', '.join(section.tasks)}"
    )
    launch_cpu(str(CONFIG), nproc=NPROC)
    train_time = time.perf_counter() - started

    results = Path(section.output_dir) / "results"
    plots = plot_each_metric(results, Path(section.output_dir) / "plots")
    print_summary(results, plots, Path(section.output_dir) / "tensorboard", train_time)
    return 0


def plot_each_metric(results: Path, plots_dir: Path) -> list[Path]:
    """One PNG per (metric, task): the metric against the training step, ± one standard error."""
    from lighteval_nanotron.tracking.plot import load_history, plot_results

    history = load_history(results)
    metrics = sorted({metric for tasks in history.values() for scores in tasks.values() for metric in scores})
    paths: list[Path] = []
    for metric in metrics:
        paths += plot_results(results, plots_dir / metric, metrics=[metric])
    return paths


def print_summary(results: Path, plots: list[Path], tensorboard: Path, train_time: float) -> None:
    import json

    from lighteval_nanotron.tracking import format_results_table

    files = sorted(results.rglob("results_*.json"), key=lambda path: int(path.stem.split("_")[1]))
    print(f"\nTraining + evaluation took {train_time:.0f}s. Results per step:")
    for path in files:
        content = json.loads(path.read_text())
        general = content["config_general"]
        print(
            f"  step {general['training_step']:>3} ({general['consumed_tokens']} tokens, "
            f"{general['wall_time_s']:.1f}s): {path}"
        )
    if files:
        print("\n" + format_results_table(json.loads(files[-1].read_text())["results"]))
    print(f"\nTensorBoard: {tensorboard}  (tensorboard --logdir {tensorboard})")
    print("Plots:\n" + "\n".join(f"  {path}" for path in plots))


if __name__ == "__main__":
    sys.exit(main())
