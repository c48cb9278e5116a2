"""The built-in early-signal suite: `early_signal` in a task list (hook section, `eval --tasks`).

The tasks, formulation and metrics that published studies find informative for small models
early in training (criteria and sources: docs/signal.md, "The early-signal suite"): the cloze
formulation of nine benchmarks, 0-shot, each with plain and per-character accuracy, the gold
answer's bits per byte and its per-character probability among the choices (and, in results,
their centered values and the centered suite score).
"""

from __future__ import annotations

EARLY_SIGNAL = "early_signal"

EARLY_SIGNAL_TASKS: list[str] = [
    "lighteval|arc_eng_cf:easy|0",
    "lighteval|arc_eng_cf:challenge|0",
    "lighteval|hellaswag_eng_cf|0",
    "lighteval|piqa_eng_cf|0",
    "lighteval|siqa_eng_cf|0",
    "lighteval|winogrande_eng_cf|0",
    "lighteval|openbookqa_eng_cf|0",
    "lighteval|csqa_eng_cf|0",
    "lighteval|mmlu_eng_cf|0",  # the 57 subjects; lighteval's group average lighteval|mmlu_eng_cf:_average|0
]

BUILTIN_TASK_GROUPS: dict[str, list[str]] = {EARLY_SIGNAL: EARLY_SIGNAL_TASKS}
"""Task groups every registry knows, like a custom module's `TASKS_GROUPS` (which win over them)."""
