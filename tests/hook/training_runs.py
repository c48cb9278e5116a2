"""Real Nanotron training runs on CPU for the hook tests: configs from the shipped tiny_cpu_train.yaml
of the installed Nanotron (configs/ or configs/nanotron_main/),
a worker that trains and reports losses, a parameter digest and what the evaluator did."""

import dataclasses
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import torch
import yaml

from lighteval_nanotron.nanotron_compat.variant import shipped_config
from tests.helpers.nanotron_versions import ON_MAIN, STARCODER2_CONFIG_ON_MAIN

REPO = Path(__file__).resolve().parents[2]
TINY_CONFIG = shipped_config("tiny_cpu_train.yaml")
TOKENIZER = REPO / "configs" / "tiny_tokenizer"
TASKS = ["lighteval|arc:easy|0", "lighteval|piqa|0"]
MODEL_NAME = "hook-test"
STARCODER2_MODEL_CONFIG: Dict[str, Any] = {
    "activation_function": "gelu_pytorch_tanh",
    "attn_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "resid_pdrop": 0.0,
    "bos_token_id": 1023,
    "eos_token_id": 1023,
    "grouped_query": True,
    "multi_query": False,
    "num_kv_heads": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "is_starcoder2_config": True,
    "layer_norm_epsilon": 1.0e-05,
    "max_position_embeddings": 256,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "rope_theta": 50000,
    "sliding_window_size": None,
    "vocab_size": 1024,
}
"""The tiny Starcoder2 (grouped-query) the hook tests train besides the tiny Llama."""
QWEN2_MODEL_CONFIG: Dict[str, Any] = {
    "attention_bias": True,
    "bos_token_id": 1023,
    "eos_token_id": 1023,
    "hidden_size": 64,
    "intermediate_size": 128,
    "is_qwen2_config": True,
    "log_attn_probs": False,  # a flash-attn diagnostic the CPU stand-in cannot return
    "max_position_embeddings": 256,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "num_key_value_heads": 2,
    "rope_theta": 50000.0,
    "tie_word_embeddings": True,
    "vocab_size": 1024,
}
"""The tiny dense Qwen2 (current Nanotron only) the hook tests train; `QWEN2_MOE_MODEL_CONFIG` its MoE variant."""
QWEN2_MOE_MODEL_CONFIG: Dict[str, Any] = {
    **QWEN2_MODEL_CONFIG,
    "tie_word_embeddings": False,
    "moe_config": {
        "num_experts": 4,
        "top_k": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "enable_shared_expert": True,
        "layers": [0, 2],
    },
}


def write_config(
    folder: Path,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    train_steps: int = 4,
    checkpoint_interval: int = 1000,
    section: Optional[Dict[str, Any]] = None,
    evaluate: bool = True,
    name: str = "train.yaml",
    model_config: Optional[Dict[str, Any]] = None,
    init_checkpoint: Optional[Path] = None,
    skip_unconfigurable: bool = True,
    **tokens: Any,
) -> Path:
    """The shipped tiny config at a layout, writing under `folder`; `section` updates ours;
    `model_config` replaces the tiny Llama's (e.g. `STARCODER2_MODEL_CONFIG`); with
    `init_checkpoint` training starts from its weights (the same at every layout). A Starcoder2
    config under main skips the test unless `skip_unconfigurable` is False (to test its refusal)."""
    if ON_MAIN and skip_unconfigurable and model_config is not None and model_config.get("is_starcoder2_config"):
        pytest.skip(STARCODER2_CONFIG_ON_MAIN)
    content = yaml.safe_load(TINY_CONFIG.read_text())
    if model_config is not None:
        content["model"]["model_config"] = model_config
    if init_checkpoint is not None:
        content["model"]["init_method"] = {"path": str(init_checkpoint)}
    content["parallelism"].update(tp=tp, pp=pp, dp=dp)
    content["tokens"].update(
        {"train_steps": train_steps, "sequence_length": 32, "batch_accumulation_per_replica": 1, **tokens}
    )
    content["checkpoints"].update(checkpoints_path=str(folder / "checkpoints"), checkpoint_interval=checkpoint_interval)
    content["tokenizer"]["tokenizer_name_or_path"] = str(TOKENIZER)
    content["logging"].update(log_level="warning", log_level_replica="warning")
    if evaluate:
        content["lighteval_nanotron"] = {
            "tasks": ",".join(TASKS),
            "data_dirs": ["bundled"],
            "max_samples": 4,
            "eval_interval": 2,
            "eval_at_start": False,
            "eval_at_end": True,
            "tokens_per_batch": 1024,
            "output_dir": str(folder / "eval"),
            "loggers": ["json", "details", "tensorboard", "log"],
            "model_name": MODEL_NAME,
            "failure_timeout_s": 60,
            **(section or {}),
        }
    else:
        del content["lighteval_nanotron"]
    path = folder / name
    path.write_text(yaml.safe_dump(content))
    return path


def _digest(model: Any) -> str:
    hasher = hashlib.sha256()
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        hasher.update(name.encode())
        hasher.update(param.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())  # any dtype, bf16 too
    return hasher.hexdigest()


def train_worker(config_path: str, wandb_mode: Optional[str] = "disabled") -> Dict[str, Any]:
    """run_distributed worker: train from `config_path` with `EvaluatingTrainer`, report what happened.
    `wandb_mode` sets WANDB_MODE (None: leave the environment as it is)."""
    if wandb_mode is not None:
        os.environ["WANDB_MODE"] = wandb_mode
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    from lighteval_nanotron.training.data.dataloader import build_dataloader
    from tests.helpers.setup_counts import count_setup_work

    setup_counts = count_setup_work()
    info = _Collect(level=20)

    class RecordingTrainer(EvaluatingTrainer):
        def training_step(self, dataloader):
            returned = super().training_step(dataloader)  # (outputs, loss); main adds z-loss and logs
            loss = returned[1]
            self.losses.append(None if loss is None else float(loss.item()))
            self.step_ends.append(time.time())
            return returned

    trainer = RecordingTrainer(config_path)
    trainer.losses = []
    trainer.step_ends = []
    trainer.train(build_dataloader(trainer, cpu=True))
    evaluator = trainer.evaluator
    return {
        "step_ends": trainer.step_ends,
        "step_seconds": list(evaluator.step_times.seconds) if evaluator else [],
        "launches": [dataclasses.asdict(record) for record in getattr(evaluator, "launches", [])],
        "children": child_processes(),
        "losses": trainer.losses,
        "params": _digest(trainer.unwrapped_model),
        "tp_modes": sorted(
            {m.mode.name for m in trainer.unwrapped_model.modules() if hasattr(m, "pg") and hasattr(m, "mode")}
        ),
        "evaluated": list(evaluator.evaluated) if evaluator else [],
        "failures": list(evaluator.failures) if evaluator else [],
        "setup_counts": dict(setup_counts),
        "reporting": bool(evaluator and evaluator.pipeline and evaluator.pipeline.model.is_reporting_rank),
        "eval_log": [message for message in info.messages if message.startswith("[lighteval_nanotron] step ")],
        "progress_log": [m for m in info.messages if m.startswith("[lighteval_nanotron] evaluation at step ")],
        "async_setup_log": [m for m in info.messages if m.startswith("[lighteval_nanotron] asynchronous evaluation (")],
        "last_costs": dict(evaluator.last_costs) if evaluator else {},
    }


def child_processes() -> List[Dict[str, str]]:
    """This process's children (pid, state, command line): a finished run leaves none of its own
    behind, and no zombie (state Z)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, ppid = text.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid():
            children.append({"pid": stat.parent.name, "state": state, "cmdline": cmdline.strip()})
    return children


def results_files(output_dir: Path) -> Dict[int, dict]:
    """Training step -> results JSON content, for every results file of the test model."""
    from lighteval_nanotron.tracking import results_files_by_step

    return {step: json.loads(path.read_text()) for step, path in results_files_by_step(output_dir, MODEL_NAME).items()}


def assert_finite_results(content: dict, tasks: List[str]) -> None:
    assert set(tasks) <= set(content["results"]), content["results"].keys()
    for task in tasks:
        values = [v for k, v in content["results"][task].items() if not k.endswith("_stderr")]
        assert values and all(math.isfinite(v) for v in values), (task, content["results"][task])


def tensorboard_scalars(log_dir: Path) -> Dict[str, List[int]]:
    """Tag -> steps of every scalar in the event files under `log_dir`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps: Dict[str, List[int]] = {}
    for events in sorted(log_dir.rglob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            steps.setdefault(tag, []).extend(event.step for event in accumulator.Scalars(tag))
    return steps


class _Collect:
    """A logging handler that keeps the hook's messages (formatted) at `level` and above in a list."""

    def __init__(self, level: int = 40) -> None:
        import logging

        self.messages: List[str] = []
        handler = logging.Handler(level=level)
        handler.emit = lambda record: self.messages.append(record.getMessage())
        hook_logger = logging.getLogger("lighteval_nanotron.hook")
        hook_logger.addHandler(handler)
        if hook_logger.getEffectiveLevel() > level:
            hook_logger.setLevel(level)


def train_logging_worker(config_path: str) -> Dict[str, Any]:
    """`train_worker`, plus the hook's error messages on this rank."""
    collected = _Collect()
    report = train_worker(config_path)
    report["errors"] = collected.messages
    return report


def train_expecting_error_worker(config_paths: List[str]) -> List[Dict[str, Any]]:
    """Train from each config in turn; report the exception each raised and the step it got to."""
    os.environ["WANDB_MODE"] = "disabled"
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    from lighteval_nanotron.training.data.dataloader import build_dataloader

    reports = []
    for path in config_paths:
        trainer = None
        try:
            trainer = EvaluatingTrainer(path)
            trainer.train(build_dataloader(trainer, cpu=True))
            reports.append({"error": None, "type": None, "step": trainer.iteration_step})
        except Exception as error:  # noqa: BLE001 - the test inspects it
            step = None if trainer is None else trainer.iteration_step
            reports.append({"error": str(error), "type": type(error).__name__, "step": step})
    return reports
