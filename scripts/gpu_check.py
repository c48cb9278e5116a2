"""The device check: the engine on CUDA against the CPU of the same machine, the hook inside a bf16
training, and the figures only a GPU gives. Fails loudly (exit status 1, one `FAIL` line per
mismatch) when a number is out of its bound. docs/gpu_check.md says how it is run and read.

    bash scripts/gpu_check.sh --out "$OUT"           # the lent GPU machine: installs the carried wheels, runs this
    bash scripts/gpu_check.sh --dry --out /tmp/dry   # the same path on CPU/gloo at toy sizes (CI)

Steps (`OUT/gpu_check.json` holds every figure, `OUT/summary.txt` the short version):
1. environment: device, torch, CUDA, numpy, transformers, the carried wheels in use;
2. models: a random Llama of SmolLM2-135M's shape from a fixed seed (converted through the
   project's HF -> Nanotron path, SmolLM2's tokenizer), and the trained tiny counting model of
   `.gpu-carry/counting-llama` (confident greedy generations);
3. evaluations, one process per device: each model in fp32 and bf16 on the CPU (every core: the
   reference) and on the GPU (TP1), every doc compared: fp32 log-probs within FP32_ATOL + FP32_RTOL
   x |CPU|, greedy generations equal, bf16 bounded by what bf16 costs on the CPU
   (device_check/evaluations.py); the same docs through transformers on the GPU (the baseline);
4. the hook inside a short bf16 training of the same shape, bitwise against the same training
   without it, and its cost for a standard suite in training steps (device_check/training.py);
5. the memory-safe evaluation: the same training with the hook's evaluations at an unbounded token
   budget under memory pressure (on CUDA, a ballast, then a capped allocator), bitwise against the
   training without evaluation, its scores against the default budget's (device_check/memory.py);
6. figures: the measured bf16 matmul peak; docs/s and model FLOP/s for scoring and generation at
   TP1 on SmolLM2's shape and a 1B Llama shape (device_check/figures.py).

`--dry` runs every step on the CPU (the "device" process on gloo, at TP1 as on one GPU) with toy
shapes and a few docs: the CI test of this path (tests/scripts/test_gpu_check_dry.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))

from device_check.profiles import PROFILES, Profile

SEED = 1234
RANDOM_TASKS = (
    "lighteval|arc:easy|0,leaderboard|hellaswag|0,lighteval|piqa|0,leaderboard|mmlu:abstract_algebra|5,"
    "lighteval|gsm8k|0"
)
TRAINED_TASKS = "custom|check_counting|0,custom|check_counting_continue|0"
CHECK_TASKS = Path(__file__).resolve().parent / "device_check" / "tasks.py"
IMAGE_PACKAGES = (
    "numpy",
    "transformers",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
    "pyarrow",
    "pandas",
    "fsspec",
)
CARRIED_PACKAGES = ("nanotron", "dacite", "datasets", "dill", "multiprocess", "gguf")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "NVIDIA_TF32_OVERRIDE": "0",
        "LIGHTEVAL_NANOTRON_DATA_DIRS": "bundled",
        "OMP_NUM_THREADS": str(threads),
        "WANDB_MODE": "disabled",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(REPO)) if p)
    return {**env, **(extra or {})}


def _torchrun_command(nproc: int, args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(nproc),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_port()),
        *args,
    ]


def _run_all(jobs: list[tuple[list[str], dict[str, str], Path]], timeout: float) -> list[tuple[int, float]]:
    """Run the commands at once (each to its log), each stopped after `timeout` s; (exit code, seconds)."""
    started = time.perf_counter()
    running = []
    for command, env, log in jobs:
        log.parent.mkdir(parents=True, exist_ok=True)
        stream = log.open("w")
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True
        )
        running.append((process, stream))
    outcomes = []
    for process, stream in running:
        try:
            code = process.wait(timeout=max(1.0, timeout - (time.perf_counter() - started)))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # torchrun and its workers
            process.wait()
            code = 124
        stream.close()
        outcomes.append((code, time.perf_counter() - started))
    return outcomes


def _torchrun(nproc: int, args: list[str], env: dict[str, str], timeout: float, log: Path) -> tuple[int, float]:
    return _run_all([(_torchrun_command(nproc, args), env, log)], timeout)[0]


def _error_line(log: Path) -> str:
    """The last exception line of a failed run's log (else its last line)."""
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    errors = [line for line in lines if re.search(r"(Error|Exception|error:)", line) and "elastic" not in line]
    return (errors or lines or ["(no output)"])[-1].strip()[:400]


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").strip().splitlines()[-lines:]) if log.is_file() else ""


# ------------------------------------------------------------------ steps


def _origin(module: str) -> str | None:
    spec = importlib.util.find_spec(module)
    return None if spec is None else str(spec.origin)


def unmet_requirements(packages: tuple[str, ...]) -> list[str]:
    """`"datasets: pyarrow>=24.0.0 (found 23.0.1)"` for each requirement of the carried packages that
    the installed versions do not meet: they are installed with --no-deps over the image's own
    packages, so nothing else checks; a mismatch is reported (gpu_check.json, summary NOTE lines),
    not refused, since the code paths the check uses may not care."""
    from packaging.requirements import Requirement

    unmet = []
    for name in packages:
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            try:
                found = importlib.metadata.version(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                found = None
            if found is None or not requirement.specifier.contains(found, prereleases=True):
                unmet.append(f"{name}: {requirement} (found {found or 'none'})")
    return unmet


def environment(dry: bool) -> dict[str, Any]:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    versions = {}
    for name in IMAGE_PACKAGES + CARRIED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "dry": dry,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "gpu_names": [torch.cuda.get_device_name(i) for i in range(gpus)],
        "cpu_count": os.cpu_count(),
        "packages": versions,
        "carried_from": {name: _origin(name) for name in CARRIED_PACKAGES},
        "unmet_requirements": unmet_requirements(CARRIED_PACKAGES),
        "attention": "flash-attn" if importlib.util.find_spec("flash_attn") else "SDPA stand-in",
    }


def _eval_job(ns: argparse.Namespace, profile: Profile, models: dict[str, Path], device: str) -> dict[str, Any]:
    runs = []
    for kind, checkpoint in models.items():
        for dtype in ("float32", "bfloat16"):
            name = f"{device}-{kind}-{dtype}"
            runs.append(
                {
                    "name": name,
                    "checkpoint": str(checkpoint),
                    "dtype": dtype,
                    "tasks": RANDOM_TASKS if kind == "random" else TRAINED_TASKS,
                    "custom_tasks": str(CHECK_TASKS),
                    "max_samples": profile.max_samples,
                    "output_dir": str(ns.work / "runs" / name),
                }
            )
    cpu = device == "cpu"
    return {
        "layout": [1, 1, 1],
        "cpu": cpu or ns.dry,
        "threads": profile.cpu_threads if cpu else 1,
        "runs": runs,
        "timings": str(ns.work / f"{device}-timings.json"),
    }


def evaluations(ns: argparse.Namespace, profile: Profile, models: dict[str, Path]) -> tuple[dict, list, list[str]]:
    """The CPU reference and the device runs, at the same time (one worker process each, TP1: one
    GPU; the CPU one with the cores the device process leaves), then every doc compared."""
    from device_check.evaluations import compare_bf16, compare_fp32, read_details, read_results, write_job

    jobs = {device: _eval_job(ns, profile, models, device) for device in ("cpu", "device")}
    commands = []
    for device, job in jobs.items():
        job_file = write_job(ns.work / f"{device}-job.json", **job)
        command = _torchrun_command(1, [__file__, "--worker", "eval", str(job_file)])
        commands.append((command, _env(job["threads"]), ns.work / f"{device}-eval.log"))
    outcomes = _run_all(commands, ns.remaining())
    runs_of, failures = {}, []
    for (device, job), (code, wall), (_, _, log) in zip(jobs.items(), outcomes, commands):
        runs_of[device] = {"seconds": wall, "code": code, "names": [r["name"] for r in job["runs"]]}
        if code != 0:
            failures.append(f"{device} evaluations failed (exit {code}, {log.name}): {_error_line(log)}")
            runs_of[device]["error"] = _tail(log)
    if failures:
        return runs_of, [], failures
    loaded = {}
    for device in jobs:
        timings = json.loads((ns.work / f"{device}-timings.json").read_text())
        for name in runs_of[device]["names"]:
            folder = ns.work / "runs" / name
            loaded[name] = {"details": read_details(folder), "results": read_results(folder), **timings[name]}
        runs_of[device]["timings"] = timings
    comparisons = []
    for kind in models:
        cpu32, cpu16 = loaded[f"cpu-{kind}-float32"], loaded[f"cpu-{kind}-bfloat16"]
        comparisons.append(compare_fp32(cpu32, loaded[f"device-{kind}-float32"], f"{kind} fp32: device vs cpu", kind))
        comparisons.append(
            compare_bf16(cpu32, cpu16, loaded[f"device-{kind}-bfloat16"], f"{kind} bf16: device vs cpu fp32", kind)
        )
    failures += [f for c in comparisons for f in c["failures"]]
    return runs_of, comparisons, failures


def training(ns: argparse.Namespace, profile: Profile) -> tuple[dict[str, Any], list[str]]:
    """The hook in a bf16 training, bitwise against the same training without it; its cost."""
    from device_check.models import SHAPES, TOKENIZER_FOLDER
    from device_check.training import DETERMINISM_ENV, compare_trainings, hook_cost, train_config

    out = ns.work / "training"
    reports, failures = {}, []
    for name, evaluate in (("train-with-hook", True), ("train-without", False)):
        config = train_config(out, name, SHAPES[profile.shape], profile, ns.carry / TOKENIZER_FOLDER, evaluate)
        report, log = out / name, out / f"{name}.log"
        args = [__file__, "--worker", "train", str(config), str(report)] + (["--dry"] if ns.dry else [])
        code, wall = _torchrun(1, args, _env(1, DETERMINISM_ENV), ns.remaining(), log)
        if code != 0:
            failures.append(f"{name} failed (exit {code}, {log.name}): {_error_line(log)}")
            reports[name] = {"error": _tail(log), "seconds": wall}
            continue
        reports[name] = {"seconds": wall, "ranks": [json.loads(Path(f"{report}.rank0.json").read_text())]}
    summary: dict[str, Any] = {
        "shape": profile.shape,
        "runs": reports,
        "sequence_length": profile.sequence_length,
        "micro_batch_size": profile.micro_batch_size,
        "suite_samples": profile.suite_samples,
    }
    if failures:
        return summary, failures
    compared, more = compare_trainings(reports, profile)
    summary.update(compared)
    try:
        summary["hook_cost"] = hook_cost(out / "train-with-hook" / "eval", profile.train_steps)
    except ValueError as error:  # no results file, or several
        more.append(f"the hook's results at step {profile.train_steps} are not readable: {error}")
    return summary, failures + more


def memory(ns: argparse.Namespace, profile: Profile) -> tuple[dict[str, Any], list[str]]:
    """The training once more, its evaluations with an unbounded token budget under memory pressure:
    against the training without evaluation (bitwise) and the evaluations of the default budget."""
    from device_check.memory import TOKENS_PER_BATCH, compare_memory_run
    from device_check.models import SHAPES, TOKENIZER_FOLDER
    from device_check.training import DETERMINISM_ENV, train_config

    out, name = ns.work / "training", "train-memory"
    plain = out / "train-without.rank0.json"
    if not plain.is_file() or not (out / "train-with-hook" / "eval").is_dir():
        return {}, ["memory: needs the training step's runs (do not --skip training)"]
    section = {"tokens_per_batch": TOKENS_PER_BATCH, "memory_budget_gb": profile.memory_budget_gb}
    config = train_config(out, name, SHAPES[profile.shape], profile, ns.carry / TOKENIZER_FOLDER, True, section)
    report, log = out / name, out / f"{name}.log"
    args = [__file__, "--worker", "train", str(config), str(report), "memory"] + (["--dry"] if ns.dry else [])
    code, wall = _torchrun(1, args, _env(1, DETERMINISM_ENV), ns.remaining(), log)
    if code != 0:
        return {"error": _tail(log), "seconds": wall}, [f"{name} failed (exit {code}, {log.name}): {_error_line(log)}"]
    reports = {
        name: {"ranks": [json.loads(Path(f"{report}.rank0.json").read_text())]},
        "train-without": {"ranks": [json.loads(plain.read_text())]},
    }
    summary, failures = compare_memory_run(reports, out, [profile.train_steps // 2, profile.train_steps])
    return {"seconds": wall, "tokens_per_batch": TOKENS_PER_BATCH, **summary}, failures


def figures(ns: argparse.Namespace, profile: Profile) -> tuple[dict[str, Any], list[str]]:
    """The measured bf16 matmul peak, the benchmark per shape, the transformers baseline."""
    from device_check.figures import bench_command, kind_figures, matmul_peak, read_bench
    from device_check.models import SHAPES, TOKENIZER_FOLDER

    peak = matmul_peak("cpu" if ns.dry else "cuda", profile.peak_size, profile.peak_repeats)
    result: dict[str, Any] = {"bf16_matmul_peak": peak, "shapes": {}}
    failures = []
    extra = ["--max-new-tokens", "16"] if ns.dry else []
    for name in profile.bench_shapes:
        log = ns.work / f"bench-{name}.log"
        command = bench_command(name, SHAPES[name], profile.bench_scale, ns.carry / TOKENIZER_FOLDER, ns.work, extra)
        ((code, wall),) = _run_all([(command, _env(1), log)], ns.remaining())
        if code != 0:
            failures.append(f"benchmark {name} failed (exit {code}, {log.name}): {_error_line(log)}")
            result["shapes"][name] = {"error": _tail(log), "seconds": wall}
            continue
        bench = read_bench(ns.work, name)
        result["shapes"][name] = {
            "seconds": wall,
            "kinds": kind_figures(bench, peak["flop_per_s"]),
            "record": bench["record"],
        }
    baseline, more = transformers_baseline(ns)
    return {**result, "transformers_baseline": baseline}, failures + more


def transformers_baseline(ns: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The device run of the random model in bf16, again through transformers on the same device."""
    timings = ns.work / "device-timings.json"
    if not timings.is_file():
        return {}, ["transformers baseline: no device evaluation to compare with"]
    job = {
        "checkpoint": str(ns.work / "models" / "random"),
        "output_dir": str(ns.work / "runs" / "device-random-bfloat16"),
        "dtype": "bfloat16",
        "cpu": ns.dry,
        "figures": str(ns.work / "baseline.json"),
        "engine_model_seconds": json.loads(timings.read_text())["device-random-bfloat16"]["model_seconds"],
    }
    job_file = ns.work / "baseline-job.json"
    job_file.write_text(json.dumps(job))
    log = ns.work / "baseline.log"
    command = [sys.executable, __file__, "--worker", "baseline", str(job_file)]
    ((code, _),) = _run_all([(command, _env(1), log)], ns.remaining())
    if code != 0:
        return {"error": _tail(log)}, [f"transformers baseline failed (exit {code}, {log.name}): {_error_line(log)}"]
    return json.loads((ns.work / "baseline.json").read_text()), []


# ------------------------------------------------------------------ report


def summary_lines(report: dict[str, Any]) -> list[str]:
    from device_check.report import summary_lines as lines

    return lines(report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("gpu_check"),
        help="gpu_check.json, summary.txt and logs.tar.gz (the runs' logs and small files) go here",
    )
    parser.add_argument("--work", type=Path, default=None, help="models, runs and logs (default: a temporary folder)")
    parser.add_argument("--dry", action="store_true", help="CPU/gloo at toy sizes instead of CUDA (CI)")
    parser.add_argument("--carry", type=Path, default=REPO / ".gpu-carry", help="the carried assets (make gpu-carry)")
    parser.add_argument(
        "--skip", default="", help="comma list of steps to skip: evaluations, training, memory, figures"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=450.0,
        help="seconds for the whole check: each step gets what is left, a step past it is stopped "
        "and reported, and the report is always written",
    )
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser


def _archive_logs(work: Path, target: Path) -> None:
    """The logs, jobs, timings and benchmark JSON of `work` (no weights, no details) as one file."""
    with tarfile.open(target, "w:gz") as archive:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix in (".log", ".json", ".yaml") and "models" not in path.parts:
                archive.add(path, arcname=str(path.relative_to(work)))


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.worker:
        return _worker(ns.worker, ns.dry)
    started = time.perf_counter()
    ns.remaining = lambda: ns.budget - (time.perf_counter() - started)
    ns.out, ns.carry = ns.out.resolve(), ns.carry.resolve()
    os.environ["GPU_CARRY"] = str(ns.carry)  # the check's tasks file reads its counting docs there
    ns.work = (ns.work or Path(tempfile.mkdtemp(prefix="gpu_check_"))).resolve()
    profile = PROFILES["dry" if ns.dry else "gpu"]
    env = environment(ns.dry)
    if not ns.dry and env["gpus"] == 0:
        print("error: no CUDA device is visible: run on the GPU machine, or pass --dry for the CPU/gloo check.")
        return 2
    from device_check.models import random_checkpoint, trained_checkpoint

    ns.out.mkdir(parents=True, exist_ok=True)
    ns.work.mkdir(parents=True, exist_ok=True)
    made = random_checkpoint(profile.shape, SEED, ns.carry, ns.work / "models" / "random")
    models = {"random": Path(made["checkpoint"]), "trained": trained_checkpoint(ns.carry)}
    report: dict[str, Any] = {
        "environment": env,
        "profile": dataclasses.asdict(profile),
        "work": str(ns.work),
        "models": {**made, "trained": str(models["trained"])},
        "step_seconds": {"models": time.perf_counter() - started},
    }
    failures: list[str] = []
    skip = set(ns.skip.split(",")) - {""}
    steps = (
        ("evaluations", lambda: evaluations(ns, profile, models)),
        ("training", lambda: training(ns, profile)),
        ("memory", lambda: memory(ns, profile)),
        ("figures", lambda: figures(ns, profile)),
    )
    for name, step in steps:
        if name in skip:
            continue
        if ns.remaining() < 5:
            failures.append(f"{name}: not run, the budget of {ns.budget:.0f} s is spent (--budget)")
            continue
        step_started = time.perf_counter()
        print(f"[gpu_check] {name} ({ns.remaining():.0f} s of the budget left) ...", flush=True)
        outcome = step()
        if name == "evaluations":
            report["evaluations"], report["comparisons"], more = outcome
        else:
            report[name], more = outcome
        report["step_seconds"][name] = time.perf_counter() - step_started
        failures += more
    report["failures"] = failures
    report["budget"] = ns.budget
    report["seconds"] = time.perf_counter() - started
    (ns.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    lines = summary_lines(report)
    (ns.out / "summary.txt").write_text("\n".join(lines) + "\n")
    _archive_logs(ns.work, ns.out / "logs.tar.gz")
    print("\n".join(lines))
    return 1 if failures else 0


def _worker(args: list[str], dry: bool) -> int:
    kind, *rest = args
    if kind == "eval":
        from device_check.evaluations import eval_worker

        eval_worker(*rest)
    elif kind == "baseline":
        from device_check.baseline import baseline_worker

        baseline_worker(*rest)
    else:
        from device_check.training import train_worker

        train_worker(*rest, cpu=dry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
