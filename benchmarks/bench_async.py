"""Training step times with no evaluation, with evaluation in the loop, and with asynchronous evaluation.

Usage (CPU, one process per rank, one thread each):
    OMP_NUM_THREADS=1 python benchmarks/bench_async.py --steps 40 --checkpoint-interval 10 --repeats 2

Trains the shipped tiny Llama (`configs/tiny_cpu_train.yaml` of the installed Nanotron) on one CPU
process with `lighteval-nanotron train`, three ways, alternated run by run: `none` (no
`lighteval_nanotron:` section), `loop` (evaluation at every checkpoint, in the loop) and `async`
(each checkpoint evaluated by a launched local CPU process, `asynchronous: {launcher: local, cpu:
true}`), on `lighteval|arc:easy|0` and `lighteval|piqa|0` (--max-samples docs each). It prints per
run: Nanotron's own `elapsed_time_per_iteration_ms` (median and mean over the steps after the first
two; it leaves out checkpoint saves and what runs after them, the loop's evaluations included), the
seconds from the first to the last step's log line (what the training pays, evaluations in the loop
included; one-second resolution), the wall time of the whole command (async: including the wait for
the last evaluations) and the CPU seconds of the command and everything it started (evaluations
included), then the medians per mode. On a machine with as many cores as processes the launched
evaluation does not share the training's cores; on fewer, it competes with training for them and
the step times show it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if importlib.util.find_spec("lighteval_nanotron") is None:  # run from a source checkout without install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from lighteval_nanotron.nanotron_compat.variant import shipped_config  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STEP_TIME = re.compile(r"elapsed_time_per_iteration_ms: ([0-9.]+)([KM]?)")
STEP_LINE = re.compile(r"^(\d\d/\d\d/\d{4} \d\d:\d\d:\d\d) .*iteration: (\d+) / \d+", re.MULTILINE)
MODES = ("none", "loop", "async")


def write_config(folder: Path, mode: str, steps: int, interval: int, max_samples: int) -> Path:
    content = yaml.safe_load(shipped_config("tiny_cpu_train.yaml").read_text())
    content["parallelism"].update(tp=1, pp=1, dp=1)
    content["tokens"].update(train_steps=steps)
    content["checkpoints"].update(checkpoints_path=str(folder / "checkpoints"), checkpoint_interval=interval)
    content["tokenizer"]["tokenizer_name_or_path"] = str(REPO / "configs" / "tiny_tokenizer")
    content["logging"].update(iteration_step_info_interval=1, log_level="info", log_level_replica="info")
    section = {
        "tasks": "lighteval|arc:easy|0,lighteval|piqa|0",
        "data_dirs": ["bundled"],
        "max_samples": max_samples,
        "eval_at_checkpoints": True,
        "eval_at_end": True,
        "output_dir": str(folder / "eval"),
        "loggers": ["json", "log"],
        "progress_bar": False,
    }
    if mode == "async":
        section["asynchronous"] = {"launcher": "local", "cpu": True, "max_in_flight": 1, "status_interval_s": 1.0}
    content.pop("lighteval_nanotron", None)
    if mode != "none":
        content["lighteval_nanotron"] = section
    path = folder / "train.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def run(mode: str, steps: int, interval: int, max_samples: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench_async_{mode}_") as tmp:
        config = write_config(Path(tmp), mode, steps, interval, max_samples)
        command = [sys.executable, "-m", "lighteval_nanotron", "train", "--config-file", str(config), "--cpu"]
        command += ["--nproc", "1"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)}  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{mode} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        log = done.stdout + done.stderr
        scale = {"": 1.0, "K": 1e3, "M": 1e6}
        step_ms = [float(value) * scale[unit] for value, unit in STEP_TIME.findall(log)]
        stamps = [time.mktime(time.strptime(stamp, "%m/%d/%Y %H:%M:%S")) for stamp, _ in STEP_LINE.findall(log)]
        results = sorted(p.parent.name for p in (Path(tmp) / "eval" / "results").rglob("results_*.json"))
    steady = step_ms[2:] or step_ms
    return {
        "mode": mode,
        "steps_logged": len(step_ms),
        "step_ms_median": statistics.median(steady),
        "step_ms_mean": statistics.fmean(steady),
        "train_s": stamps[-1] - stamps[0] if len(stamps) > 1 else float("nan"),
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "evaluated_steps": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--checkpoint-interval", type=int, default=10)
    parser.add_argument("--max-samples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None, help="also write the runs as JSON")
    args = parser.parse_args()
    runs = []
    for repeat in range(args.repeats):
        for mode in MODES if repeat % 2 == 0 else reversed(MODES):
            runs.append(run(mode, args.steps, args.checkpoint_interval, args.max_samples))
            r = runs[-1]
            print(
                f"{r['mode']:>5}: step {r['step_ms_median']:7.1f} ms median, {r['step_ms_mean']:7.1f} ms mean "
                f"({r['steps_logged']} steps) | first to last step {r['train_s']:5.0f} s | wall {r['wall_s']:6.1f} s | "
                f"cpu {r['cpu_s']:6.1f} s | "
                f"evaluated steps {r['evaluated_steps']}",
                flush=True,
            )
    print(f"\nmedians over {args.repeats} run(s) per mode (load average {os.getloadavg()[0]:.1f}):")
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        print(
            f"{mode:>5}: step {statistics.median(r['step_ms_median'] for r in mine):7.1f} ms | "
            f"first to last step {statistics.median(r['train_s'] for r in mine):5.0f} s | "
            f"wall {statistics.median(r['wall_s'] for r in mine):6.1f} s | "
            f"cpu {statistics.median(r['cpu_s'] for r in mine):6.1f} s"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
