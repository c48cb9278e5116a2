"""The device check's summary: one line per comparison, training and figure, then the verdict."""

from __future__ import annotations

from typing import Any


def _environment(report: dict[str, Any]) -> str:
    env = report["environment"]
    where = "DRY: CPU/gloo" if env["dry"] else "CUDA"
    names = ", ".join(sorted(set(env["gpu_names"]))) or "no GPU"
    packages = env["packages"]
    return (
        f"gpu check ({where}): {names}; python {env['python']}, torch {env['torch']}, CUDA {env['cuda']}, "
        f"numpy {packages['numpy']}, transformers {packages['transformers']}, nanotron {packages['nanotron']}; "
        f"attention: {env['attention']}; {env['cpu_count']} CPU cores; {report['seconds']:.0f} s"
    )


def _comparison_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for result in report.get("comparisons", []):
        for task, entry in result["tasks"].items():
            parts = []
            if "max_abs_diff" in entry:
                parts.append(f"|dlogprob| max {entry['max_abs_diff']:.3g}, median {entry['median_abs_diff']:.3g}")
            if "max_bound" in entry:
                parts.append(f"bounds {entry['median_bound']:.3g} / {entry['max_bound']:.3g}")
            if "generations" in entry:
                parts.append(f"greedy equal {entry['generations_equal']:.2f} of {entry['generations']}")
            if entry.get("accuracy") is not None:
                parts.append(f"acc {entry['accuracy']:.3f} vs CPU bf16 {entry['cpu_bf16_accuracy']}")
            lines.append(f"{result['compared']}: {task}: " + "; ".join(parts))
    return lines


def _training_lines(report: dict[str, Any]) -> list[str]:
    train = report.get("training", {})
    lines = []
    if "bitwise_equal" in train:
        lines.append(
            f"training bf16 {train['shape']} TP1, {train['tokens_per_step']} tokens/step: with vs without "
            f"the hook bitwise equal: {train['bitwise_equal']} (evaluated at {train['evaluated_steps']})"
        )
    cost = train.get("hook_cost")
    if cost and cost.get("cost_train_steps") is not None:
        lines.append(
            f"hook cost, standard suite ({cost['docs']} docs) at step {cost['step']}: {cost['eval_s']:.2f} s "
            f"= {cost['cost_train_steps']:.1f} training steps of {cost['mean_train_step_s']:.3f} s"
        )
    return lines


def _gib(value: int) -> str:
    return f"{value / 2**30:.2f} GiB"


def _batches(plans: list[dict[str, Any]]) -> str:
    return ", ".join(f"{p['micro_batches']} x <= {p['largest']} tokens (budget {p['tokens_per_batch']})" for p in plans)


def _memory_lines(report: dict[str, Any]) -> list[str]:
    memory = report.get("memory", {})
    if "bitwise_equal" not in memory:
        return []
    lines = [
        f"memory-safe evaluation (tokens_per_batch {memory['tokens_per_batch']}): training bitwise equal to "
        f"the training without evaluation: {memory['bitwise_equal']}"
    ]
    for entry in memory["evaluations"]:
        seen = ""
        if "pressure" in entry:
            seen = f"{entry['pressure']} {_gib(entry['bytes'])}, the engine saw {_gib(entry['engine_free'])} free; "
        lines.append(
            f"memory run step {entry['step']}: {seen}micro-batches {_batches(entry['before'])} -> "
            f"{_batches(entry['after'])}; {len(entry['retries'])} out-of-memory retries"
            + (f" ({'; '.join(entry['retries'])})" if entry["retries"] else "")
        )
    for step, tasks in memory["steps"].items():
        for task, entry in tasks.items():
            lines.append(
                f"memory run step {step} vs default budget: {task}: |dlogprob| max {entry.get('max_abs_diff', 0):.3g}, "
                f"median {entry.get('median_abs_diff', 0):.3g}; decisive docs {entry['decisive_docs']}, "
                f"flipped {entry['decisive_flipped']}"
            )
    return lines


def _figure_lines(report: dict[str, Any]) -> list[str]:
    figures = report.get("figures", {})
    lines = []
    peak = figures.get("bf16_matmul_peak")
    if peak:
        lines.append(
            f"bf16 matmul peak ({peak['size']}^3, median of {peak['repeats']}): {peak['flop_per_s']:.3g} FLOP/s"
        )
    for shape, entry in figures.get("shapes", {}).items():
        for kind, row in entry.get("kinds", {}).items():
            lines.append(
                f"engine {shape} bf16 TP1 {kind}: {row['docs']} docs, {row['docs_per_s']:.1f} docs/s, "
                f"{row['flop_per_s']:.3g} FLOP/s = {100 * row['of_bf16_peak']:.1f}% of the bf16 peak "
                f"({100 * row['of_fair_peak']:.0f}% of the fair per-shape peak)"
            )
    baseline = figures.get("transformers_baseline")
    if baseline and "seconds" in baseline:
        engine_s = baseline["engine_model_seconds"]
        lines.append(
            f"same docs ({baseline['scored_docs']} scored, {baseline['generated_docs']} generated), random "
            f"{report['profile']['shape']} {baseline['dtype']}: transformers {baseline['seconds']:.2f} s, "
            f"engine {engine_s:.2f} s ({baseline['seconds'] / engine_s:.2f}x); transformers log-probs within "
            f"{baseline['max_abs_logprob_diff_vs_engine']:.3g} of the engine's"
        )
    return lines


def _seconds(value: Any) -> str:
    return f"{value:.0f} s" if isinstance(value, (int, float)) else "?"


def _step_lines(report: dict[str, Any]) -> list[str]:
    """Where the time went: each step, and inside it each process, to size a rerun (`--skip`, `--budget`)."""
    steps = report.get("step_seconds", {})
    parts = []
    for step, seconds in steps.items():
        inner = []
        if step == "evaluations":
            for device, entry in report.get("evaluations", {}).items():
                runs = ", ".join(
                    f"{name.removeprefix(device + '-')} {_seconds(t.get('seconds'))}"
                    for name, t in entry.get("timings", {}).items()
                )
                inner.append(f"{device} {_seconds(entry.get('seconds'))}" + (f": {runs}" if runs else ""))
        elif step == "training":
            inner = [f"{n} {_seconds(r.get('seconds'))}" for n, r in report.get("training", {}).get("runs", {}).items()]
        elif step == "memory":
            inner = [f"train-memory {_seconds(report.get('memory', {}).get('seconds'))}"]
        elif step == "figures":
            figures = report.get("figures", {})
            inner = [f"bench {n} {_seconds(e.get('seconds'))}" for n, e in figures.get("shapes", {}).items()]
            if "seconds" in figures.get("transformers_baseline", {}):
                inner.append(f"transformers {_seconds(figures['transformers_baseline']['seconds'])} (model time)")
        parts.append(f"{step} {_seconds(seconds)}" + (f" ({'; '.join(inner)})" if inner else ""))
    budget = report.get("budget")
    return [f"time: {', '.join(parts)}" + (f"; budget {_seconds(budget)}" if budget else "")] if parts else []


def _note_lines(report: dict[str, Any]) -> list[str]:
    """What is not a failure but may explain one: carried wheels' needs the image does not meet,
    nondeterministic kernels met in the training."""
    env = report.get("environment", {})
    lines = [f"NOTE carried wheel needs {need}" for need in env.get("unmet_requirements", [])]
    for name, run in report.get("training", {}).get("runs", {}).items():
        for rank in run.get("ranks", []):
            lines += [f"NOTE {name}: {warning}" for warning in rank.get("nondeterministic", [])]
    return lines


def summary_lines(report: dict[str, Any]) -> list[str]:
    lines = [_environment(report), *_step_lines(report), *_note_lines(report)]
    lines += _comparison_lines(report) + _training_lines(report) + _memory_lines(report) + _figure_lines(report)
    lines += [f"FAIL {failure}" for failure in report["failures"]]
    lines.append("RESULT: " + ("FAILED" if report["failures"] else "PASSED"))
    return lines
