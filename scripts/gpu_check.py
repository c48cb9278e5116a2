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
5. figures: the measured bf16 matmul peak; docs/s and model FLOP/s for scoring and generation at
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
import socket
import subprocess
import sys
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


def _torchrun(nproc: int, args: list[str], env: dict[str, str], timeout: float, log: Path) -> tuple[int, float]:
    command = [
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
    started = time.perf_counter()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("w") as stream:
            code = subprocess.run(
                command, cwd=REPO, env=env, stdout=stream, stderr=subprocess.STDOUT, timeout=timeout
            ).returncode
    except subprocess.TimeoutExpired:
        code = 124
    return code, time.perf_counter() - started


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").strip().splitlines()[-lines:]) if log.is_file() else ""


# ------------------------------------------------------------------ steps


def _origin(module: str) -> str | None:
    spec = importlib.util.find_spec(module)
    return None if spec is None else str(spec.origin)


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
        "attention": "flash-attn" if importlib.util.find_spec("flash_attn") else "SDPA stand-in",
    }


def evaluations(ns: argparse.Namespace, profile: Profile, models: dict[str, Path]) -> tuple[dict, list, list[str]]:
    """Both devices' runs (one worker process each), the comparisons, the transformers baseline."""
    from device_check.evaluations import compare_bf16, compare_fp32, read_details, read_results, write_job

    failures: list[str] = []
    runs_of = {}
    for device in ("cpu", "device"):
        cpu = device == "cpu" or ns.dry
        layout = (1, 1, 1)  # one GPU; the CPU reference in one process with every core
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
                        "output_dir": str(ns.out / "runs" / name),
                    }
                )
        job = {
            "layout": layout,
            "cpu": cpu,
            "threads": profile.cpu_threads if device == "cpu" else 1,
            "runs": runs,
            "timings": str(ns.out / f"{device}-timings.json"),
        }
        if device == "device":
            job["baseline"] = {
                "run": "device-random-bfloat16",
                "checkpoint": str(models["random"]),
                "output_dir": str(ns.out / "runs" / "device-random-bfloat16"),
                "dtype": "bfloat16",
                "figures": str(ns.out / "baseline.json"),
            }
        job_file = write_job(ns.out / f"{device}-job.json", **job)
        log = ns.out / f"{device}-eval.log"
        code, wall = _torchrun(
            layout[0] * layout[1] * layout[2],
            [__file__, "--worker", "eval", str(job_file)],
            _env(job["threads"]),
            ns.timeout,
            log,
        )
        runs_of[device] = {"seconds": wall, "code": code, "names": [r["name"] for r in runs]}
        if code != 0:
            failures.append(f"{device} evaluations failed (exit {code}, {log.name}): {_tail(log, 3)}")
            runs_of[device]["error"] = _tail(log)
    if failures:
        return runs_of, [], failures
    loaded = {}
    for device in ("cpu", "device"):
        timings = json.loads((ns.out / f"{device}-timings.json").read_text())
        for name in runs_of[device]["names"]:
            folder = ns.out / "runs" / name
            loaded[name] = {"details": read_details(folder), "results": read_results(folder), **timings[name]}
    comparisons = []
    for kind in models:
        cpu32, cpu16 = loaded[f"cpu-{kind}-float32"], loaded[f"cpu-{kind}-bfloat16"]
        comparisons.append(compare_fp32(cpu32, loaded[f"device-{kind}-float32"], f"{kind} fp32: device vs cpu", kind))
        comparisons.append(
            compare_bf16(cpu32, cpu16, loaded[f"device-{kind}-bfloat16"], f"{kind} bf16: device vs cpu fp32", kind)
        )
    failures += [f for c in comparisons for f in c["failures"]]
    for device in runs_of.values():
        device["timings"] = {
            name: {k: v for k, v in loaded[name].items() if k.endswith("seconds")} for name in device["names"]
        }
    return runs_of, comparisons, failures


def training(ns: argparse.Namespace, profile: Profile) -> tuple[dict[str, Any], list[str]]:
    """The hook in a bf16 training, bitwise against the same training without it; its cost."""
    from device_check.models import SHAPES, TOKENIZER_FOLDER
    from device_check.training import DETERMINISM_ENV, compare_trainings, hook_cost, train_config

    out = ns.out / "training"
    reports, failures = {}, []
    for name, evaluate in (("train-with-hook", True), ("train-without", False)):
        config = train_config(out, name, SHAPES[profile.shape], profile, ns.carry / TOKENIZER_FOLDER, evaluate)
        report, log = out / name, out / f"{name}.log"
        args = [__file__, "--worker", "train", str(config), str(report)] + (["--dry"] if ns.dry else [])
        code, wall = _torchrun(1, args, _env(1, DETERMINISM_ENV), ns.timeout, log)
        if code != 0:
            failures.append(f"{name} failed (exit {code}, {log.name}): {_tail(log, 3)}")
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


def figures(ns: argparse.Namespace, profile: Profile) -> tuple[dict[str, Any], list[str]]:
    from device_check.figures import kind_figures, matmul_peak, run_bench
    from device_check.models import SHAPES, TOKENIZER_FOLDER

    peak = matmul_peak("cpu" if ns.dry else "cuda", profile.peak_size, profile.peak_repeats)
    result: dict[str, Any] = {"bf16_matmul_peak": peak, "shapes": {}}
    failures = []
    extra = ["--max-new-tokens", "16"] if ns.dry else []
    for name in profile.bench_shapes:
        bench = run_bench(
            name, SHAPES[name], profile.bench_scale, ns.carry / TOKENIZER_FOLDER, ns.out, _env(1), extra, ns.timeout
        )
        if "error" in bench:
            failures.append(f"benchmark {name} failed: {bench['error'].splitlines()[-1:]}")
            result["shapes"][name] = bench
            continue
        result["shapes"][name] = {
            "seconds": bench["seconds"],
            "kinds": kind_figures(bench, peak["flop_per_s"]),
            "record": bench["record"],
        }
    return result, failures


# ------------------------------------------------------------------ report


def summary_lines(report: dict[str, Any]) -> list[str]:
    from device_check.report import summary_lines as lines

    return lines(report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gpu_check"), help="folder for the JSON, summary and runs")
    parser.add_argument("--dry", action="store_true", help="CPU/gloo at toy sizes instead of CUDA (CI)")
    parser.add_argument("--carry", type=Path, default=REPO / ".gpu-carry", help="the carried assets (make gpu-carry)")
    parser.add_argument("--skip", default="", help="comma list of steps to skip: evaluations, training, figures")
    parser.add_argument("--timeout", type=float, default=420.0, help="seconds per subprocess")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.worker:
        return _worker(ns.worker, ns.dry)
    ns.out, ns.carry = ns.out.resolve(), ns.carry.resolve()
    started = time.perf_counter()
    profile = PROFILES["dry" if ns.dry else "gpu"]
    env = environment(ns.dry)
    if not ns.dry and env["gpus"] == 0:
        print("error: no CUDA device is visible: run on the GPU machine, or pass --dry for the CPU/gloo check.")
        return 2
    from device_check.models import random_checkpoint, trained_checkpoint

    ns.out.mkdir(parents=True, exist_ok=True)
    step_started = time.perf_counter()
    made = random_checkpoint(profile.shape, SEED, ns.carry, ns.out / "models" / "random")
    models = {"random": Path(made["checkpoint"]), "trained": trained_checkpoint(ns.carry)}
    report: dict[str, Any] = {
        "environment": env,
        "profile": dataclasses.asdict(profile),
        "models": {**made, "trained": str(models["trained"]), "seconds": time.perf_counter() - step_started},
    }
    failures: list[str] = []
    skip = set(ns.skip.split(",")) - {""}
    steps = (
        ("evaluations", lambda: evaluations(ns, profile, models)),
        ("training", lambda: training(ns, profile)),
        ("figures", lambda: figures(ns, profile)),
    )
    for name, step in steps:
        if name in skip:
            continue
        step_started = time.perf_counter()
        print(f"[gpu_check] {name} ...", flush=True)
        outcome = step()
        if name == "evaluations":
            report["evaluations"], report["comparisons"], more = outcome
            baseline = ns.out / "baseline.json"
            if baseline.is_file():
                report["baseline"] = json.loads(baseline.read_text())
        else:
            report[name], more = outcome
        report.setdefault("step_seconds", {})[name] = time.perf_counter() - step_started
        failures += more
    report["failures"] = failures
    report["seconds"] = time.perf_counter() - started
    (ns.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    lines = summary_lines(report)
    (ns.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failures else 0


def _worker(args: list[str], dry: bool) -> int:
    kind, *rest = args
    if kind == "eval":
        from device_check.evaluations import eval_worker

        eval_worker(*rest)
    else:
        from device_check.training import train_worker

        train_worker(*rest, cpu=dry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
