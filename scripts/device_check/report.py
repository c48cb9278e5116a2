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


def summary_lines(report: dict[str, Any]) -> list[str]:
    lines = [_environment(report)]
    lines += _comparison_lines(report) + _training_lines(report) + _figure_lines(report)
    lines += [f"FAIL {failure}" for failure in report["failures"]]
    lines.append("RESULT: " + ("FAILED" if report["failures"] else "PASSED"))
    return lines
