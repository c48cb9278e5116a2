"""The `eval` command's fixed cost, phase by phase: imports, mesh, tasks and datasets, model
build, request preparation, weights, the evaluation itself, writing.

    python benchmarks/bench_setup.py CHECKPOINT [--tasks ...] [--max-samples 4] [--repeats 3]

Each repeat is a fresh interpreter running `lighteval-nanotron eval CHECKPOINT --cpu` (one
process, the bundled slices), with every named phase of `checkpoint_eval.runner` timed (each
goes through `collectively(world, what, fn)`). Printed per repeat and as the median:

- `process`: the whole command, interpreter start to exit, measured from outside;
- `start and exit`: the process minus `main total`: the interpreter's start (a few hundredths)
  and its exit after the command returns;
- `imports`: importing the command line (`lighteval_nanotron.cli.main`) and the eval verb's
  module; `building the parser`: every verb's parser (the `train` verb's imports torch);
- `the mesh`: CPU support for Nanotron and the process group;
- one line per runner phase (`loading the datasets`, `building the model`, ...), with the
  evaluation (`evaluating <checkpoint>`) split into the model's run and the rest;
- `fixed cost`: the process minus the evaluation's own `wall_time_s` (what a run pays
  whatever its doc count).

Each figure is wall seconds and CPU seconds of the process (`time.process_time`, the whole
process from outside: `getrusage`); on a shared machine the CPU seconds move much less with
the load than the wall seconds.

`python -X importtime` on the same command shows which imports cost what.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

DEFAULT_TASKS = "lighteval|arc:easy|0,lighteval|piqa|0,leaderboard|hellaswag|0"


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) since `start`."""
    wall, cpu = _clocks()
    return wall - start[0], cpu - start[1]


def _child(argv: list[str], report: Path) -> NoReturn:
    """Run the command in this process with its phases timed, as the process entry point runs it
    (`cli.run`; a checkout from before it has only `main`); write the phases to `report`; exit."""
    started = _clocks()
    import lighteval_nanotron.cli.main as cli
    from lighteval_nanotron.cli import eval_cmd  # noqa: F401  (the verb's own imports)

    phases: list[tuple[str, tuple[float, float]]] = [("imports", _since(started))]
    start = _clocks()
    cli.build_parser()  # every verb's parser: what `main` does first (its imports stay cached)
    phases.append(("building the parser (imports torch)", _since(start)))
    from lighteval_nanotron.checkpoint_eval import runner

    timed, mesh = runner.collectively, runner.parallel_context_for

    def collectively(world, what, fn):
        start = _clocks()
        try:
            return timed(world, what, fn)
        finally:
            phases.append((what, _since(start)))

    @contextlib.contextmanager
    def parallel_context_for(*args):
        start = _clocks()
        with mesh(*args) as context:
            phases.append(("the mesh (CPU patches, process group)", _since(start)))
            yield context

    runner.collectively, runner.parallel_context_for = collectively, parallel_context_for
    code = getattr(cli, "run", cli.main)(["eval", *argv])
    phases.append(("main total", _since(started)))
    report.write_text(json.dumps({"code": code, "phases": phases}))
    sys.exit(code)


def _one_run(checkpoint: str, tasks: str, max_samples: int, out: Path) -> dict:
    report = out / "phases.json"
    argv = [
        checkpoint, "--cpu", "--tasks", tasks, "--max-samples", str(max_samples), "--data-dir", "bundled",
        "--output-dir", str(out / "eval"), "--no-progress", "--loggers", "json",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    started, children = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, __file__, "--child", str(report), *argv], check=True, env=env, stdout=subprocess.DEVNULL
    )
    process = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    process_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    data = json.loads(report.read_text())
    (results,) = (out / "eval" / "results").rglob("results_*.json")
    general = json.loads(results.read_text())["config_general"]
    costs = json.loads(results.read_text()).get("task_costs", {})
    model_s = sum(cost["seconds"] for cost in costs.values())
    phases = {"process": (process, process_cpu)}
    for name, (wall, cpu) in data["phases"]:
        name = "evaluating the checkpoint" if name.startswith("evaluating ") else name
        name = "loading the weights" if name.startswith("loading /") or name.startswith("loading checkpoint") else name
        before = phases.get(name, (0.0, 0.0))
        phases[name] = (before[0] + wall, before[1] + cpu)
    phases["  of which model calls"] = (model_s, float("nan"))
    main_total = phases.get("main total", (0.0, 0.0))
    phases["start and exit"] = (process - main_total[0], process_cpu - main_total[1])
    evaluation = phases.get("evaluating the checkpoint", (0.0, 0.0))
    phases["fixed cost"] = (process - float(general["wall_time_s"]), process_cpu - evaluation[1])
    return phases


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[3:], Path(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a converted checkpoint folder (e.g. SmolLM2-135M)")
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--max-samples", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    ns = parser.parse_args(argv)
    runs = []
    for repeat in range(ns.repeats):
        with tempfile.TemporaryDirectory() as folder:
            runs.append(_one_run(ns.checkpoint, ns.tasks, ns.max_samples, Path(folder)))
        items = runs[-1].items()
        print(f"run {repeat + 1}: " + ", ".join(f"{k.strip()} {w:.2f}s/{c:.2f}s" for k, (w, c) in items), flush=True)
    names = list(dict.fromkeys(name for run in runs for name in run))
    print(f"\nmedian of {len(runs)} runs ({ns.tasks}, max_samples {ns.max_samples}, load {os.getloadavg()[0]:.2f}):")
    print(f"  {'phase':<40} {'wall s':>7} {'CPU s':>7}")
    for name in names:
        walls = [run[name][0] for run in runs if name in run]
        cpus = [run[name][1] for run in runs if name in run]
        print(f"  {name:<40} {statistics.median(walls):7.2f} {statistics.median(cpus):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
