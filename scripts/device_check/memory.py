"""The memory-safe evaluation inside a bf16 training: the hook's evaluations with a token budget far
over the memory free, beside the same training as device_check/training.py.

`train-memory` trains as `train-without` does and evaluates the standard suite at the steps of
`train-with-hook`, with `tokens_per_batch` at TOKENS_PER_BATCH (unbounded: micro-batches of up to
`max_rows_per_batch` packed rows, about 5.7 GB for SmolLM2's shape in bf16 by the engine's own
estimate). On CUDA each evaluation runs under the memory pressure of PRESSURES, in turn:

- `ballast`: a tensor takes all the device's free memory but LEAVE bytes, so the engine must cut
  its micro-batches for what is free (`engine.memory`: the free memory less a fifth);
- `cap`: the allocator is capped (`torch.cuda.set_per_process_memory_fraction`) at what the process
  holds plus CAP bytes, which `mem_get_info` does not show: the micro-batches the plan keeps from
  the first evaluation run out of memory and are retried smaller, on every rank.

The CPU (the dry run) has neither: the engine does not probe its free memory, so the profile's
`memory_budget_gb` cuts the micro-batches there. Checked (`compare_memory_run`): both evaluations
done and none failed; every loss and the final weights bitwise those of `train-without`; per doc,
each choice's log-prob within SCORE_MAX of `train-with-hook`'s at the same step (the same weights,
the default budget) and every decisive doc's choice the same. Recorded per evaluation: the
pressure, the memory the engine saw free, each plan's micro-batches (the budget they were cut for,
their number, the largest) before and after, and each retry the engine logged.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Iterator

TOKENS_PER_BATCH = 10**9
"""The memory run's `tokens_per_batch`: no token bound; only the memory budget cuts its micro-batches."""
LEAVE = 2**30
"""`ballast`: bytes of the device left free (below the unbounded micro-batch's estimate)."""
CAP = 2**28
"""`cap`: bytes the allocator may take beyond what the process holds when the evaluation starts."""
PRESSURES = (("ballast", LEAVE), ("cap", CAP))
"""On CUDA, the pressure of the memory run's first and second evaluation."""
SCORE_MEDIAN = 0.05
SCORE_MAX = 0.5
"""Per choice, |log-prob| of the memory run against `train-with-hook` at the same step: the median
and the largest allowed. Batching changes which rows share a matmul (in bf16 on CUDA another kernel
may round differently), not a score: a wrong mask, position or row costs whole nats. On CPU the two
are equal. A first bound: the first GPU run's recorded figures confirm or tighten it."""
ENGINE_LOGGER = "lighteval_nanotron.models.engine.model"


def plan_batches(plans: list[Any]) -> list[dict[str, Any]]:
    """Per scoring plan of the prepared pipeline: its kind, the token budget its micro-batches were
    cut for, their number and the largest (tokens, padding included)."""
    from lighteval_nanotron.models.engine.scoring_plan import ScoringPlan

    return [
        {
            "kind": plan.kind,
            "tokens_per_batch": plan.config.tokens_per_batch,
            "micro_batches": len(plan.batches),
            "largest": max((b.input_ids.numel() for b in plan.batches), default=0),
        }
        for plan in plans
        if isinstance(plan, ScoringPlan)
    ]


@contextlib.contextmanager
def pressure(kind: str, size: int, record: dict[str, Any]) -> Iterator[None]:
    """CUDA memory pressure for one evaluation (see the module's docstring); `record` gets what the
    engine then sees free."""
    import torch

    from lighteval_nanotron.models.engine.memory import free_bytes

    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(device)
    ballast = None
    if kind == "ballast":
        ballast = torch.empty(max(0, free - size), dtype=torch.uint8, device=device)
    else:
        torch.cuda.set_per_process_memory_fraction(min(1.0, (torch.cuda.memory_reserved(device) + size) / total))
    record.update(pressure=kind, bytes=size, device_free_before=free, engine_free=free_bytes(device))
    try:
        yield
    finally:
        del ballast
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()


class _Retries(logging.Handler):
    """The engine's "ran out of memory; retrying with micro-batches of N tokens" lines."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "retrying" in record.getMessage():
            self.lines.append(record.getMessage())


def watch_evaluations(trainer: Any, cuda: bool) -> list[dict[str, Any]]:
    """Wrap the trainer's in-loop evaluations: each one under its PRESSURES entry on CUDA, its plans'
    micro-batches and the engine's retries recorded (the returned list fills as they run)."""
    how = trainer.evaluator.how
    evaluate, records = how.evaluate, []
    retries = _Retries()
    engine_logger = logging.getLogger(ENGINE_LOGGER)
    engine_logger.addHandler(retries)
    engine_logger.setLevel(logging.WARNING)  # the retries are recorded whatever the training's log level

    def watched(trainer_: Any, step: int, *args: Any) -> None:
        record: dict[str, Any] = {"step": step, "before": plan_batches(how.pipeline.prepared.plans)}
        kind, size = PRESSURES[len(records) % len(PRESSURES)]
        start = len(retries.lines)
        with pressure(kind, size, record) if cuda else contextlib.nullcontext():
            evaluate(trainer_, step, *args)
        record.update(after=plan_batches(how.pipeline.prepared.plans), retries=retries.lines[start:])
        records.append(record)

    how.evaluate = watched
    return records


def compare_memory_run(reports: dict[str, Any], folder: Path, steps: list[int]) -> tuple[dict[str, Any], list[str]]:
    """The memory run against `train-without` (bitwise losses and weights) and, per step, against the
    evaluation of `train-with-hook` (per doc log-probs, decisive choices); `folder` holds the runs."""
    from device_check.evaluations import choice_differences, choice_summary, decisive_choices, read_details

    memory, plain = reports["train-memory"]["ranks"][0], reports["train-without"]["ranks"][0]
    failures: list[str] = []
    bitwise = memory["losses"] == plain["losses"] and memory["params"] == plain["params"]
    if not bitwise:
        failures.append("memory run: its training differs from the training without evaluation")
    if memory["evaluated"] != steps or memory["failures"]:
        failures.append(f"memory run: evaluated at {memory['evaluated']} (expected {steps}): {memory['failures']}")
    summary: dict[str, Any] = {"bitwise_equal": bitwise, "evaluations": memory["memory"], "steps": {}}
    for step in memory["evaluated"]:
        label = f"memory run step {step} vs default budget"
        reference = read_details(folder / "train-with-hook" / "eval", step)
        got = read_details(folder / "train-memory" / "eval", step)
        tasks = {}
        for task, pairs in choice_differences(reference, got, label, failures).items():
            entry = tasks[task] = choice_summary(pairs)
            decisive, flipped = decisive_choices(reference[task], got[task], SCORE_MAX)
            entry.update(decisive_docs=decisive, decisive_flipped=len(flipped))
            if entry.get("median_abs_diff", 0) > SCORE_MEDIAN or entry.get("max_abs_diff", 0) > SCORE_MAX:
                failures.append(
                    f"{label}: {task}: |diff| median {entry['median_abs_diff']:.3g} / max {entry['max_abs_diff']:.3g}"
                    f" > bounds {SCORE_MEDIAN:g} / {SCORE_MAX:g}"
                )
            if flipped:
                failures.append(f"{label}: {task}: docs {flipped[:5]} pick another choice")
        summary["steps"][step] = tasks
    cut = any(r["after"] != r["before"] for r in memory["memory"])
    if not cut:
        failures.append("memory run: no evaluation cut its micro-batches (the budget did not bind)")
    return summary, failures
