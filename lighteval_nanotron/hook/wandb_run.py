"""W&B for a training run: started only when the `lighteval_nanotron:` section lists `wandb`.

Nanotron 0.4's trainer calls `wandb.init` whenever `wandb` is importable (it is, with the test
extras), so a user who never asked for W&B gets "No API key configured" or a prompt for a key.
`training_wandb` wraps Nanotron's `pre_training`: it skips Nanotron's own `wandb.init`; without
`wandb` among the loggers W&B stays off for the whole run; with it, the run is opened on
Nanotron's logging rank with the section's project, entity and run options, and Nanotron's
training scalars and our evaluation scalars go into that one run (with `asynchronous`, the launched
evaluations log into runs of their own in this run's group: `hook.asynchronous`). Nanotron logs its
scalars with an `iteration_step` key and no explicit step: they are declared against that key, the
evaluation scalars against `train/step` (the same training step; see `tracking.wandb_logger`).
"""

import os
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch.distributed as dist

from lighteval_nanotron.errors import TrackingError
from lighteval_nanotron.options.hook import EvaluationConfig
from lighteval_nanotron.tracking.wandb_logger import NANOTRON_STEP_KEY, open_run

NANOTRON_SCALARS = (
    "consumed_tokens",
    "elapsed_time_per_iteration_ms",
    "tokens_per_sec",
    "tokens_per_sec_per_gpu",
    "global_batch_size",
    "lm_loss",
    "lr",
    "model_tflops_per_gpu",
    "hardware_tflops_per_gpu",
    "grad_norm",
)
"""The scalars Nanotron 0.4's `train_step_logs` sends to W&B (memory and disk figures aside)."""


def wants_wandb(config: Optional[EvaluationConfig]) -> bool:
    """True when the user asked for W&B: `wandb` among the section's loggers, mode (the section's,
    else `$WANDB_MODE`) not `disabled`."""
    if config is None or "wandb" not in config.loggers:
        return False
    return (config.wandb_mode or os.environ.get("WANDB_MODE")) != "disabled"


@contextmanager
def training_wandb(trainer: Any, config: Optional[EvaluationConfig]) -> Iterator[Any]:
    """Wrap Nanotron's `pre_training` (every rank): yields the run opened here, if any.

    Nanotron's own `wandb.init` (project and a time-stamped name only, online unless `WANDB_MODE`
    says otherwise) is skipped; after `pre_training` its training-step logging is switched back on
    only where the run was opened here.
    """
    import nanotron.trainer

    module = nanotron.trainer.wandb
    nanotron.trainer.wandb = None
    run = _agreed_run(trainer, config) if wants_wandb(config) else None
    try:
        yield run
    finally:
        if run is not None:
            nanotron.trainer.wandb = module


def _agreed_run(trainer: Any, config: EvaluationConfig) -> Any:
    """`_open_run` on every rank, agreed: if W&B fails on the logging rank, every rank raises its
    TrackingError together (the others would otherwise wait for it in their next collective)."""
    from lighteval_nanotron.parallel.agreement import agree

    run, error = None, None
    try:
        run = _open_run(trainer, config)
    except Exception as caught:  # noqa: BLE001 - agreed on below, then raised on every rank
        error = caught
    world = trainer.parallel_context.world_pg
    hint = "Raise lighteval_nanotron.failure_timeout_s if W&B is just slow to start."
    verdict = agree(error, world, config.failure_timeout_s, "opening the W&B run", timeout_hint=hint)
    if verdict.failed:
        raise TrackingError(f"opening the W&B run failed, so training does not start: {verdict.describe()}") from error
    return run


def _open_run(trainer: Any, config: EvaluationConfig) -> Any:
    """On Nanotron's logging rank (where the reporting rank is too): the run, with the axes declared."""
    if dist.get_rank(trainer.parallel_context.world_pg) != int(trainer.logger_ranks[0]):
        return None

    general = trainer.config.general
    name = f"{general.project}_{general.run}" if general.run else None
    # With `asynchronous` the launched evaluations' runs join this run's group (named after the run).
    group = (config.wandb_run_name or name or str(general.project)) if config.asynchronous is not None else None
    run = open_run(
        config, project=general.project, name=name, group=group, config={"nanotron_config": trainer.config.as_dict()}
    )
    run.define_metric(NANOTRON_STEP_KEY)
    for name in NANOTRON_SCALARS:
        run.define_metric(name, step_metric=NANOTRON_STEP_KEY)
    return run
