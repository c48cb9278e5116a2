"""Calibrate `lighteval-nanotron report A B` on real runs: how often it calls one of two seeds of
the same config ahead (false alarms), and how soon it calls a truly better config ahead.

Usage (from the repository root; resumable: a finished run is kept, an unfinished one is redone):
    OMP_NUM_THREADS=1 .venv/bin/python scripts/calibrate_signal.py      # reduced: 6 runs (~10-35 min on 2 cores)
    OMP_NUM_THREADS=1 .venv/bin/python scripts/calibrate_signal.py --seeds 8 --steps 400 --max-samples 300 \
        --run-dir runs/calibration_full                                 # fuller: about an hour
    .venv/bin/python scripts/calibrate_signal.py --analyze-only                        # the table again

It trains the demo's model (configs/demo_train.yaml, on one CPU process) under `--seeds` seeds of
the demo's config (learning rate 3e-3) and one seed of a truly worse config (the learning rate
divided by `--lr-divisor`), each with the demo's six cloze tasks and its held-out loss in the
loop, then compares every pair of runs at every common step with `report`'s doc-by-doc
comparison (analysis/per_doc.py), at the step and over the last `--last` common evaluations, once
without seed runs and once with the other seeds as `--seed-runs` (at least 4 seeds): between
seeds, the share of comparisons called ahead and the share of (pair, step) reports with any call
(family-wise), beside the calls of the docs' bootstrap alone; between each seed of the good config
and the worse one, the first step at which the good one is called ahead on gold bits per byte, on
held-out loss and on accuracy. The table goes to `<run-dir>/calibration.md` and `.json`
(docs/signal.md, "Calibration").
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import shutil
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
GOOD_LR = 0.003
TEXT_SPLITS = {"train": 0.9, "validation": 0.1}


def run_specs(seeds: int, lr_divisor: float) -> dict[str, dict]:
    """`{run name: {seed, learning_rate}}`: the seeds of the demo's config, and the worse config."""
    specs = {f"seed{seed}": {"seed": seed, "learning_rate": GOOD_LR} for seed in range(1, seeds + 1)}
    specs["low_lr"] = {"seed": 1, "learning_rate": GOOD_LR / lr_divisor}
    return specs


def write_config(folder: Path, name: str, spec: dict, args: argparse.Namespace) -> Path:
    """The demo's config on one process, with this run's seed and learning rate, outputs in `folder`."""
    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    config = yaml.safe_load(shipped_config("demo_train.yaml").read_text())
    config["general"].update(run=name, seed=spec["seed"])
    config["data"]["seed"] = spec["seed"]
    config["parallelism"].update(dp=1, tp=1, pp=1)
    config["tokens"]["train_steps"] = args.steps
    schedule = config["optimizer"]["learning_rate_scheduler"]
    schedule["min_decay_lr"] = spec["learning_rate"] * schedule["min_decay_lr"] / schedule["learning_rate"]
    schedule["learning_rate"] = spec["learning_rate"]
    config["checkpoints"].update(checkpoints_path=str(folder / "checkpoints"), checkpoint_interval=10 * args.steps)
    section = config["lighteval_nanotron"]
    section.update(
        output_dir=str(folder / "eval"),
        max_samples=args.max_samples,
        eval_interval=args.eval_interval,
        loggers=["json", "details"],
    )
    path = folder / "train.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def train(run_dir: Path, args: argparse.Namespace) -> dict[str, Path]:
    """Train every run not finished yet; returns `{name: its eval output folder}`."""
    from real_text import write_splits

    from lighteval_nanotron.training.run_train import launch_cpu

    write_splits(fractions=TEXT_SPLITS)
    outputs = {}
    for name, spec in run_specs(args.seeds, args.lr_divisor).items():
        folder = run_dir / name
        done = folder / "done.json"
        if not (done.exists() and json.loads(done.read_text()) == {**spec, **settings_of(args)}):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            print(f"training {name}: {spec}", flush=True)
            launch_cpu(str(write_config(folder, name, spec, args)), nproc=1)
            shutil.rmtree(folder / "checkpoints", ignore_errors=True)
            done.write_text(json.dumps({**spec, **settings_of(args)}))
        outputs[name] = folder / "eval"
    return outputs


def settings_of(args: argparse.Namespace) -> dict:
    return {"steps": args.steps, "eval_interval": args.eval_interval, "max_samples": args.max_samples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/calibration"))
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the demo's config (default: %(default)s)")
    parser.add_argument("--lr-divisor", type=float, default=10.0, help="the worse config's learning rate divisor")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--eval-interval", type=int, default=25)
    parser.add_argument("--max-samples", type=int, default=100, help="docs per task (default: %(default)s)")
    parser.add_argument("--last", type=int, default=3, help="report's --last (default: %(default)s)")
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--analyze-only", action="store_true")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error("--seeds: at least 2 (false alarms are measured between seeds)")
    os.chdir(REPO)
    sys.path[:0] = [str(REPO), str(REPO / "examples")]
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(name, "1")
    run_dir = args.run_dir.resolve()
    if args.analyze_only:
        outputs = {name: run_dir / name / "eval" for name in run_specs(args.seeds, args.lr_divisor)}
    else:
        outputs = train(run_dir, args)
    if args.train_only:
        return 0
    table, numbers = calibrate(outputs, args.last)
    (run_dir / "calibration.md").write_text(table + "\n")
    (run_dir / "calibration.json").write_text(json.dumps(numbers, indent=1) + "\n")
    print(table)
    return 0


def up_to(run, step: int):
    """The run as it stood at `step` (its details up to there; `compare_pair` cuts the series)."""
    cut = copy.copy(run)
    cut.details = {s: folders for s, folders in run.details.items() if s <= step}
    return cut


MODES = {"these runs": False, "with --seed-runs": True}
"""Without seed runs (a verdict about two runs), and with the other seeds as `--seed-runs` (about configs)."""
LABELS = {
    "gold bits per byte": lambda task, metric: metric == "gold_bpb",
    "held-out loss": lambda task, metric: task.startswith("heldout|") and metric == "loss",
    "accuracy": lambda task, metric: metric == "acc",
}


def calibrate(outputs: dict[str, Path], last: int) -> tuple[str, dict]:
    """False alarms between seeds, and the first step each seed of the good config is called ahead
    of the worse config (seed 1: the same seed as the worse config); with seed runs, the seeds
    other than the two compared."""
    from lighteval_nanotron.analysis import load_runs
    from lighteval_nanotron.analysis.paired import ALPHA, holm
    from lighteval_nanotron.analysis.per_doc import compare_pair

    runs = {}
    for name, folder in outputs.items():
        (run,) = load_runs(folder).values()
        run.name = name
        runs[name] = run
    seeds = [name for name in runs if name.startswith("seed")]
    modes = {mode: used for mode, used in MODES.items() if not used or len(seeds) >= 4}
    counts: dict[str, dict] = {}
    for mode, used in modes.items():
        for x, y in itertools.combinations(seeds, 2):
            others = [runs[s] for s in seeds if s not in (x, y)] if used else []
            for step in sorted(set(runs[x].details) & set(runs[y].details)):
                for table in compare_pair(up_to(runs[x], step), up_to(runs[y], step), last, seed_runs=others):
                    kind = counts.setdefault(
                        f"{mode}, {'step' if len(table.steps) == 1 else f'last {last}'}",
                        dict.fromkeys(
                            ("tests", "ahead", "beyond_docs", "tables", "tables_with_any", "tables_beyond_docs"), 0
                        ),
                    )
                    calls = sum(c.better is not None for c in table.comparisons)
                    beyond_docs = sum(p < ALPHA for p in holm([c.p_value for c in table.comparisons]))
                    kind["tests"] += len(table.comparisons)
                    kind["ahead"] += calls
                    kind["beyond_docs"] += beyond_docs
                    kind["tables"] += 1
                    kind["tables_with_any"] += calls > 0
                    kind["tables_beyond_docs"] += beyond_docs > 0
    first: dict[str, dict] = {}
    worse = runs["low_lr"]
    for mode, used in modes.items():
        for seed in seeds:
            good, others = runs[seed], [runs[s] for s in seeds if s != seed] if used else []
            for step in sorted(set(good.details) & set(worse.details)):
                for table in compare_pair(up_to(good, step), up_to(worse, step), last, seed_runs=others):
                    kind = first.setdefault(f"{mode}, {'step' if len(table.steps) == 1 else f'last {last}'}", {})
                    for label, wanted in LABELS.items():
                        chosen = [c for c in table.comparisons if wanted(c.task, c.metric)]
                        mine = kind.setdefault(label, {"tasks": len({c.task for c in chosen}), "worse_called_ahead": 0})
                        mine["worse_called_ahead"] += sum(c.better == "B" for c in chosen)
                        if any(c.better == "A" for c in chosen):
                            mine.setdefault("first_step_any", {}).setdefault(seed, step)
                        if chosen and all(c.better == "A" for c in chosen):
                            mine.setdefault("first_step_all", {}).setdefault(seed, step)
    numbers = {
        "seeds": seeds,
        "seed_pairs": len(list(itertools.combinations(seeds, 2))),
        "false_alarms": counts,
        "good_vs_worse": first,
    }
    return markdown(numbers), numbers


def markdown(numbers: dict) -> str:
    """The two tables of docs/signal.md, "Calibration"."""
    rows = [
        "| verdict, table | comparisons | called ahead | per comparison | reports (seed pair x step) | with a call | "
        "per report | beyond the docs' noise alone (Holm): comparisons, reports |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, c in numbers["false_alarms"].items():
        rows.append(
            f"| {kind} | {c['tests']} | {c['ahead']} | {c['ahead'] / max(c['tests'], 1):.1%} | {c['tables']} | "
            f"{c['tables_with_any']} | {c['tables_with_any'] / max(c['tables'], 1):.1%} | "
            f"{c['beyond_docs'] / max(c['tests'], 1):.1%}, {c['tables_beyond_docs'] / max(c['tables'], 1):.1%} |"
        )
    seeds = numbers["seeds"]
    rows += [
        "",
        "| verdict, table | metric | tasks | first step the good config is called ahead on any task, per seed | "
        "on every task | the worse called ahead |",
        "|---|---|---|---|---|---|",
    ]
    for kind, labels in numbers["good_vs_worse"].items():
        for label, found in labels.items():
            cells = [
                ", ".join(f"{seed.removeprefix('seed')}: {found.get(key, {}).get(seed, '-')}" for seed in seeds)
                for key in ("first_step_any", "first_step_all")
            ]
            rows.append(
                f"| {kind} | {label} | {found['tasks']} | {cells[0]} | {cells[1]} | {found['worse_called_ahead']} |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
