"""The hook inside a short bf16 training: the same training with and without evaluation in the loop,
compared bitwise (every step's loss, a digest of the final weights), and the cost of the
evaluation of a standard suite in training steps of the same model (the hook's own
`eval_cost_train_steps`: the evaluation's wall seconds over the mean training step).

The model has the check's random shape (Nanotron's random init, seed 42), trained on Nanotron's
synthetic tokens; the config is the shipped tiny_cpu_train.yaml with the shape, dtype, batch and
the hook's section replaced. Both runs use deterministic kernels (`torch.use_deterministic_algorithms`,
`CUBLAS_WORKSPACE_CONFIG`), so a difference is the hook's.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

STANDARD_SUITE = "lighteval|arc:easy|0,lighteval|piqa|0,leaderboard|hellaswag|0"
"""The README's hook example (0-shot ARC-Easy, PIQA, HellaSwag), at the profile's docs per task."""
DETERMINISM_ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def train_config(
    out: Path,
    name: str,
    shape: dict[str, Any],
    profile: Any,
    tokenizer: Path,
    evaluate: bool,
    section: dict[str, Any] | None = None,
) -> Path:
    """The training's config; with `evaluate`, the hook's section (results and details), updated by `section`."""
    import yaml

    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    content = yaml.safe_load(shipped_config("tiny_cpu_train.yaml").read_text())
    fields = content["model"]["model_config"]
    fields.update(shape, max_position_embeddings=max(profile.sequence_length, 2048))
    content["parallelism"].update(tp=1, pp=1, dp=1, tp_mode="ALL_REDUCE")
    content["model"]["dtype"] = "bfloat16"
    content["optimizer"]["accumulate_grad_in_fp32"] = True
    content["tokens"].update(
        train_steps=profile.train_steps,
        sequence_length=profile.sequence_length,
        micro_batch_size=profile.micro_batch_size,
        batch_accumulation_per_replica=1,
    )
    content["checkpoints"].update(checkpoints_path=str(out / name / "checkpoints"), checkpoint_interval=100000)
    content["tokenizer"]["tokenizer_name_or_path"] = str(tokenizer)
    content["logging"].update(log_level="warning", log_level_replica="warning")
    if evaluate:
        content["lighteval_nanotron"].update(
            tasks=STANDARD_SUITE,
            data_dirs=["bundled"],
            max_samples=profile.suite_samples,
            eval_interval=profile.train_steps // 2,
            eval_at_start=False,
            eval_at_end=True,
            output_dir=str(out / name / "eval"),
            loggers=["json", "details"],
            **(section or {}),
        )
    else:
        del content["lighteval_nanotron"]
    path = out / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content))
    return path


def train_worker(config: str, report: str, *flags: str, cpu: bool) -> None:
    """Under torchrun: train `config` with the hook's trainer; each rank writes its losses and a
    digest of its final weights. With the flag `memory`: the evaluations under memory pressure,
    their micro-batches recorded (device_check/memory.py)."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("WANDB_MODE", "disabled")
    torch.use_deterministic_algorithms(True, warn_only=True)
    if cpu:
        from datetime import timedelta

        from lighteval_nanotron.cpu import enable_cpu_support
        from lighteval_nanotron.parallel.distributed import init_process_group_from_env

        enable_cpu_support()
        init_process_group_from_env(backend="gloo", timeout=timedelta(seconds=300))
    from device_check.memory import watch_evaluations
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    from lighteval_nanotron.training.data.dataloader import build_dataloader

    losses: list[float | None] = []

    class RecordingTrainer(EvaluatingTrainer):
        def training_step(self, dataloader):
            returned = super().training_step(dataloader)  # (outputs, loss); current Nanotron adds more
            loss = returned[1]
            losses.append(None if loss is None else float(loss.item()))
            return returned

    with warnings.catch_warnings(record=True) as caught:  # kernels without a deterministic version, if any
        warnings.simplefilter("always")
        trainer = RecordingTrainer(config)
        watched = watch_evaluations(trainer, cuda=not cpu) if "memory" in flags else None
        trainer.train(build_dataloader(trainer, cpu))
    shown = set()
    for warning in caught:  # still in the log, each once
        if (str(warning.message), warning.category) not in shown:
            shown.add((str(warning.message), warning.category))
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    nondeterministic = sorted({str(w.message).splitlines()[0][:300] for w in caught if "determinis" in str(w.message)})
    hasher = hashlib.sha256()
    for name, param in sorted(trainer.unwrapped_model.named_parameters(), key=lambda item: item[0]):
        hasher.update(name.encode())
        hasher.update(param.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    evaluator = trainer.evaluator
    record = {
        "losses": losses,
        "params": hasher.hexdigest(),
        "evaluated": list(evaluator.evaluated) if evaluator else [],
        "failures": [str(f) for f in evaluator.failures] if evaluator else [],
        "tokens_per_step": trainer.global_batch_size * trainer.sequence_length,
        "nondeterministic": nondeterministic,
        "memory": watched,
    }
    Path(f"{report}.rank{dist.get_rank()}.json").write_text(json.dumps(record))


def hook_cost(eval_dir: Path, step: int) -> dict[str, Any]:
    """The hook's figures of its evaluation at `step`: seconds, mean training step, cost in steps."""
    (results_file,) = eval_dir.glob(f"results/**/{step}/results_*.json")
    content = json.loads(results_file.read_text())
    general = content.get("config_general", {})
    costs = content.get("task_costs", {})
    return {
        "step": step,
        "eval_s": general.get("wall_time_s"),
        "mean_train_step_s": general.get("mean_train_step_s"),
        "cost_train_steps": general.get("eval_cost_train_steps"),
        "docs": sum(int(cost.get("docs", 0)) for cost in costs.values()),
        "results_file": str(results_file),
    }


def _first_difference(hooked: list[dict], plain: list[dict]) -> str:
    """Where two trainings part: the first step whose loss differs, else the final weights."""
    for rank, (h, p) in enumerate(zip(hooked, plain)):
        for step, (a, b) in enumerate(zip(h["losses"], p["losses"]), start=1):
            if a != b:
                return f"rank {rank} loss at step {step}: {a!r} with the hook, {b!r} without"
        if len(h["losses"]) != len(p["losses"]):
            return f"rank {rank}: {len(h['losses'])} steps with the hook, {len(p['losses'])} without"
        if h["params"] != p["params"]:
            return f"rank {rank}: equal losses, different final weights"
    return "equal"


def compare_trainings(reports: dict[str, Any], profile: Any) -> tuple[dict[str, Any], list[str]]:
    """Losses and weights bitwise equal with and without the hook; it evaluated where planned."""
    failures: list[str] = []
    hooked, plain = reports["train-with-hook"]["ranks"], reports["train-without"]["ranks"]
    summary: dict[str, Any] = {
        "bitwise_equal": all(h["losses"] == p["losses"] and h["params"] == p["params"] for h, p in zip(hooked, plain)),
        "losses": hooked[0]["losses"],
        "evaluated_steps": hooked[0]["evaluated"],
        "tokens_per_step": hooked[0]["tokens_per_step"],
    }
    if not summary["bitwise_equal"]:
        failures.append(f"training with the hook differs from training without it: {_first_difference(hooked, plain)}")
    planned = [profile.train_steps // 2, profile.train_steps]
    if hooked[0]["evaluated"] != planned or any(h["failures"] for h in hooked):
        failures.append(f"the hook evaluated at {hooked[0]['evaluated']} (expected {planned}) or failed")
    return summary, failures
