"""A complete Nanotron training `Config` for small CPU runs (tests, the demo), for 0.4 or current
Nanotron (GitHub main: its optimizer section names an `optimizer_factory`, its data comes in
`data_stages`).

    config = build_training_config(model_config, checkpoints_path="ckpt", tp=2, pp=2, dp=1, train_steps=5)
    config.save_as_yaml("train.yaml")     # DistributedTrainer("train.yaml") reads it back

Defaults are those used in CPU tests: fp32 (fp32 gradient accumulation only for lower
precisions), TP all-reduce without async communication (0.4's async reduce-scatter TP computes
wrong gradients, huggingface/nanotron#46), 1F1B pipeline, no dataset (the caller passes a data
loader, e.g. `synthetic_dataloader`).
"""

from pathlib import Path
from typing import Any, Optional, Union

import torch

from lighteval_nanotron.nanotron_compat.imports import import_nanotron
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron


def build_training_config(
    model_config: Any,
    checkpoints_path: Union[str, Path],
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    train_steps: int = 5,
    checkpoint_interval: int = 1000,
    sequence_length: int = 32,
    micro_batch_size: int = 2,
    batch_accumulation_per_replica: int = 1,
    learning_rate: float = 1e-3,
    dtype: torch.dtype = torch.float32,
    seed: int = 42,
    tokenizer_path: Optional[str] = None,
    init_std: float = 0.02,
    init_checkpoint_path: Optional[Union[str, Path]] = None,
    resume_checkpoint_path: Optional[Union[str, Path]] = None,
    project: str = "lighteval_nanotron_cpu",
) -> Any:
    """A nanotron.config.Config for `model_config` (a LlamaConfig) at a (tp, pp, dp) layout.

    The model starts from the weights of `init_checkpoint_path` when given (any layout, e.g. a
    checkpoint of `save_nanotron_checkpoint`), else from Nanotron's random init with `init_std`
    (which depends on the layout)."""
    config_module = import_nanotron()
    from nanotron.config import (
        CheckpointsArgs,
        Config,
        DataArgs,
        ExistingCheckpointInit,
        GeneralArgs,
        LoggingArgs,
        LRSchedulerArgs,
        ModelArgs,
        OptimizerArgs,
        ParallelismArgs,
        RandomInit,
        TokenizerArgs,
        TokensArgs,
    )

    init_method = ExistingCheckpointInit(Path(init_checkpoint_path)) if init_checkpoint_path else RandomInit(init_std)
    adam = dict(adam_eps=1e-8, adam_beta1=0.9, adam_beta2=0.95, torch_adam_is_fused=False)
    schedule = LRSchedulerArgs(
        learning_rate=learning_rate,
        lr_warmup_steps=1,
        lr_warmup_style="linear",
        lr_decay_style="cosine",
        min_decay_lr=learning_rate / 10,
    )
    optimizer = dict(
        zero_stage=0,
        weight_decay=0.0,
        clip_grad=1.0,
        accumulate_grad_in_fp32=dtype != torch.float32,  # 0.4 asserts non-fp32 params for it
        learning_rate_scheduler=schedule,
    )
    data = DataArgs(dataset=None, seed=seed)
    if installed_nanotron().name == "main":
        optimizer["optimizer_factory"] = config_module.AdamWOptimizerArgs(**adam)
        stages = [config_module.DatasetStageArgs(name="synthetic", start_training_step=1, data=data)]
        data_section = {"data_stages": stages}
    else:
        optimizer.update(adam)
        data_section = {"data": data}
    return Config(
        general=GeneralArgs(project=project, run="cpu", seed=seed, ignore_sanity_checks=True),
        parallelism=ParallelismArgs(
            dp=dp, pp=pp, tp=tp, pp_engine="1f1b", tp_mode="ALL_REDUCE", tp_linear_async_communication=False
        ),
        model=ModelArgs(model_config=model_config, init_method=init_method, dtype=dtype),
        tokenizer=TokenizerArgs(tokenizer_name_or_path=tokenizer_path),
        checkpoints=CheckpointsArgs(
            checkpoints_path=Path(checkpoints_path),
            checkpoint_interval=checkpoint_interval,
            save_initial_state=False,
            resume_checkpoint_path=Path(resume_checkpoint_path) if resume_checkpoint_path else None,
        ),
        logging=LoggingArgs(log_level="warning", log_level_replica="warning", iteration_step_info_interval=1),
        tokens=TokensArgs(
            sequence_length=sequence_length,
            train_steps=train_steps,
            micro_batch_size=micro_batch_size,
            batch_accumulation_per_replica=batch_accumulation_per_replica,
        ),
        optimizer=OptimizerArgs(**optimizer),
        **data_section,
    )
