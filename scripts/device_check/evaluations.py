"""The evaluations of the device check and their comparisons.

One worker process per device (`eval_worker`, under torchrun) loads each (model, dtype) of its job
in turn and evaluates it with `lighteval_nanotron.evaluate` (the Python way in), writing the
results and details as any evaluation does; the CPU reference runs with every core of the machine.
`compare` then reads the details of two runs and checks every doc against the stated bounds.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

FP32_ATOL = 1e-3
FP32_RTOL = 2e-5
"""Device fp32 vs CPU fp32, per choice (a continuation's summed log-prob): |diff| <= ATOL + RTOL x
|CPU|. TF32 is off (NVIDIA_TF32_OVERRIDE=0); fp32 kernels of other shapes and orders differ by
about 1e-6 relative per token (CPU layouts on SmolLM2: within 6.4e-5 absolute, README); a wrong
mask, position or cache entry costs whole nats."""
BF16_FACTOR = 2.0
BF16_ATOL = 0.05
"""Device bf16 vs CPU fp32, per choice: the median |diff| at most BF16_FACTOR x that of CPU bf16 vs
CPU fp32 (the rounding bf16 costs on this model, measured in the same run) + BF16_ATOL, and the
largest at most BF16_FACTOR x the CPU's largest + BF16_ATOL. On SmolLM2-135M, CPU bf16 vs fp32:
median 0.116, max 1.22 (docs/performance.md)."""
BF16_ACCURACY = 0.1
"""Largest accuracy difference per task, device bf16 vs CPU bf16, for the trained model (its choices
are confident). A random model's choices are near-ties that any rounding may flip: there, instead,
every decisive doc must pick the CPU fp32's choice (`decisive_choices`)."""
GENERATION_AGREEMENT = {"trained": 1.0, "random": 0.9}
"""Smallest fraction of greedy generations equal to the CPU's in fp32: every one for the trained
model (its choices are confident); 0.9 for a random model, whose next-token logits are nearly
flat (a near-tie may flip under another kernel's rounding)."""


def eval_worker(job_file: str) -> None:
    """Under torchrun: every run of the job (model, dtype, tasks) on one mesh; timings to the job's
    `timings` file (reporting rank)."""
    import torch

    job = json.loads(Path(job_file).read_text())
    torch.set_num_threads(job["threads"])
    if job["cpu"]:
        from lighteval_nanotron.cpu import enable_cpu_support

        enable_cpu_support()
    from lighteval_nanotron.checkpoint_eval.loading import tokenizer_source
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.evaluate_once import evaluate
    from lighteval_nanotron.parallel.distributed import build_parallel_context
    from lighteval_nanotron.setup.tokenizer import load_tokenizer

    tp, pp, dp = job["layout"]
    context = build_parallel_context(tp, pp, dp, backend="gloo" if job["cpu"] else "nccl")
    device = torch.device("cpu") if job["cpu"] else torch.device("cuda", torch.cuda.current_device())
    timings = {}
    for run in job["runs"]:
        checkpoint = Path(run["checkpoint"])
        model, _ = load_nanotron_checkpoint(checkpoint, context, dtype=getattr(torch, run["dtype"]), device=device)
        tokenizer = load_tokenizer(tokenizer_source(None, checkpoint))
        started = time.perf_counter()
        result = evaluate(
            model,
            context,
            tokenizer,
            tasks=run["tasks"],
            max_samples=run["max_samples"],
            custom_tasks=run.get("custom_tasks"),
            model_name=run["name"],
            output_dir=run["output_dir"],
        )
        if result is not None:
            timings[run["name"]] = {"seconds": time.perf_counter() - started, "model_seconds": result.wall_time_s}
        del model
        gc.collect()
        if not job["cpu"]:
            torch.cuda.empty_cache()
    if timings:
        Path(job["timings"]).write_text(json.dumps(timings))


def read_details(output_dir: Path, step: int | None = None) -> dict[str, dict[int, dict[str, Any]]]:
    """The details an evaluation wrote (the one at training `step`, if given): per task, its rows by doc id."""
    import pyarrow.parquet as pq

    from lighteval_nanotron.tracking import details_task_name

    pattern = "details/**/details_*.parquet" if step is None else f"details/**/{step}/*/details_*.parquet"
    folders = {f.parent for f in output_dir.glob(pattern)}
    if len(folders) != 1:
        raise RuntimeError(f"{output_dir}: expected the details of one evaluation, found {len(folders)}")
    (folder,) = folders
    return {
        details_task_name(f): {row["doc_id"]: row for row in pq.read_table(f).to_pylist()}
        for f in sorted(folder.glob("details_*.parquet"))
    }


def read_results(output_dir: Path) -> dict[str, Any]:
    (results_file,) = output_dir.glob("results/**/results_*.json")
    return json.loads(results_file.read_text())["results"]


def _accuracy(metrics: dict[str, Any]) -> float | None:
    for key in ("acc", "em", "extractive_match", "exact_match", "quasi_exact_match"):
        if key in metrics:
            return float(metrics[key])
    return None


def choice_differences(reference: dict, run: dict, label: str, failures: list[str]) -> dict[str, list[tuple]]:
    """Per task, (|diff|, |reference|) of every choice's log-prob, and the generations compared
    (None, equal) rows; `failures` gets docs that do not line up (other docs, other continuations)."""
    per_task: dict[str, list[tuple]] = {}
    for task, ref_rows in reference.items():
        rows = run.get(task)
        if rows is None or set(rows) != set(ref_rows):
            failures.append(f"{label}: {task}: not the same docs")
            continue
        pairs = per_task.setdefault(task, [])
        for doc_id, ref in ref_rows.items():
            got = rows[doc_id]
            if ref["logprobs"]:
                if got["cont_tokens"] != ref["cont_tokens"] or len(got["logprobs"]) != len(ref["logprobs"]):
                    failures.append(f"{label}: {task} doc {doc_id}: not the same continuations")
                    continue
                pairs += [(abs(a - b), abs(b)) for a, b in zip(got["logprobs"], ref["logprobs"])]
            elif ref["predictions"]:
                pairs.append((None, got["predictions"] == ref["predictions"]))
    return per_task


def choice_summary(pairs: list[tuple]) -> dict[str, Any]:
    """Of `choice_differences` pairs: the choices, their largest and median |diff|, the generations equal."""
    diffs = [d for d, _ in pairs if d is not None]
    generations = [equal for d, equal in pairs if d is None]
    entry: dict[str, Any] = {"choices": len(diffs)}
    if diffs:
        entry.update(max_abs_diff=max(diffs), median_abs_diff=statistics.median(diffs))
    if generations:
        entry.update(generations=len(generations), generations_equal=sum(generations) / len(generations))
    return entry


def decisive_choices(cpu_fp32: dict, run: dict, bound: float) -> tuple[int, list[int]]:
    """Docs of one task whose CPU fp32 best choice leads the runner-up by more than 2 x `bound` (the
    largest per-choice error allowed, so no error within it can reorder them), and those among them
    where `run` picks another choice (highest summed log-prob): (decisive docs, flipped doc ids)."""
    decisive, flipped = 0, []
    for doc_id, ref in cpu_fp32.items():
        scores = ref["logprobs"]
        got = run.get(doc_id, {}).get("logprobs")
        if not scores or len(scores) < 2 or not got or len(got) != len(scores):
            continue
        best, runner_up = sorted(scores, reverse=True)[:2]
        if best - runner_up <= 2 * bound:
            continue
        decisive += 1
        if max(range(len(got)), key=got.__getitem__) != max(range(len(scores)), key=scores.__getitem__):
            flipped.append(doc_id)
    return decisive, flipped


def compare_fp32(reference: dict, run: dict, label: str, model_kind: str) -> dict[str, Any]:
    """Device fp32 against CPU fp32: every choice within FP32_ATOL + FP32_RTOL x |CPU|, greedy
    generations equal (GENERATION_AGREEMENT)."""
    failures: list[str] = []
    tasks = {}
    for task, pairs in choice_differences(reference["details"], run["details"], label, failures).items():
        entry = tasks[task] = choice_summary(pairs)
        worst = max(((d - FP32_ATOL - FP32_RTOL * r) for d, r in pairs if d is not None), default=0.0)
        if worst > 0:
            failures.append(
                f"{label}: {task}: a log-prob differs by {entry['max_abs_diff']:.3g} (bound {FP32_ATOL:g} "
                f"+ {FP32_RTOL:g} x |CPU|)"
            )
        needed = GENERATION_AGREEMENT[model_kind]
        if entry.get("generations") and entry["generations_equal"] < needed:
            failures.append(f"{label}: {task}: greedy generations equal {entry['generations_equal']:.2f} < {needed}")
    return {
        "compared": label,
        "bound": f"|diff| <= {FP32_ATOL:g} + {FP32_RTOL:g} x |CPU|",
        "tasks": tasks,
        "failures": failures,
    }


def compare_bf16(cpu_fp32: dict, cpu_bf16: dict, run: dict, label: str, model_kind: str) -> dict[str, Any]:
    """Device bf16 against CPU fp32, bounded by what CPU bf16 costs against CPU fp32 (BF16_*); every
    decisive doc's choice as CPU fp32's; the trained model's accuracy per task within BF16_ACCURACY
    of CPU bf16; greedy generations against CPU bf16's
    (the trained model's must all be equal)."""
    failures: list[str] = []
    own = choice_differences(cpu_fp32["details"], cpu_bf16["details"], f"cpu bf16 vs {label}", failures)
    same_dtype = choice_differences(cpu_bf16["details"], run["details"], f"{label} (vs cpu bf16)", failures)
    tasks = {}
    for task, pairs in choice_differences(cpu_fp32["details"], run["details"], label, failures).items():
        scored = [pair for pair in pairs if pair[0] is not None]
        generated = [pair for pair in same_dtype.get(task, []) if pair[0] is None]
        entry = tasks[task] = choice_summary(scored + generated)
        cpu = choice_summary(own.get(task, []))
        entry["cpu_bf16"] = cpu
        if "max_abs_diff" in entry and "max_abs_diff" in cpu:
            median_bound = BF16_FACTOR * cpu["median_abs_diff"] + BF16_ATOL
            max_bound = BF16_FACTOR * cpu["max_abs_diff"] + BF16_ATOL
            entry.update(median_bound=median_bound, max_bound=max_bound)
            if entry["median_abs_diff"] > median_bound or entry["max_abs_diff"] > max_bound:
                failures.append(
                    f"{label}: {task}: |diff| median {entry['median_abs_diff']:.3g} / max "
                    f"{entry['max_abs_diff']:.3g} > bounds {median_bound:.3g} / {max_bound:.3g}"
                )
            decisive, flipped = decisive_choices(cpu_fp32["details"][task], run["details"][task], max_bound)
            entry.update(decisive_docs=decisive, decisive_flipped=len(flipped))
            if flipped:
                failures.append(
                    f"{label}: {task}: docs {flipped[:5]} pick another choice than CPU fp32 although it leads "
                    f"by more than 2 x {max_bound:.3g}"
                )
        got, ref = _accuracy(run["results"].get(task, {})), _accuracy(cpu_bf16["results"].get(task, {}))
        entry.update(accuracy=got, cpu_bf16_accuracy=ref)
        if model_kind == "trained" and got is not None and ref is not None and abs(got - ref) > BF16_ACCURACY + 1e-9:
            failures.append(f"{label}: {task}: accuracy {got:.3f} vs CPU bf16 {ref:.3f}")
        if model_kind == "trained" and entry.get("generations") and entry["generations_equal"] < 1.0:
            failures.append(f"{label}: {task}: greedy generations equal to CPU bf16's {entry['generations_equal']:.2f}")
    bound = (
        f"median/max |diff| <= {BF16_FACTOR:g} x CPU bf16's + {BF16_ATOL:g}; decisive docs' choices as CPU fp32's; "
        f"trained model's accuracy within {BF16_ACCURACY:g}; generations vs CPU bf16"
    )
    return {"compared": label, "bound": bound, "tasks": tasks, "failures": failures}


def write_job(path: Path, **job: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(job, indent=2))
    return path
