"""Evaluation in Nanotron's `DistributedTrainer`: one mechanism, `attach_evaluation`, and a
subclass that is a thin use of it.

1. `EvaluatingTrainer(config_file)` (the usual way): a `DistributedTrainer` that reads the
   training YAML with its `lighteval_nanotron:` section and attaches the evaluation to itself.

       trainer = EvaluatingTrainer("configs/tiny_cpu_train.yaml")
       trainer.train(dataloader)

2. An unmodified trainer built elsewhere (e.g. Nanotron's own `run_train.py`):

       trainer = DistributedTrainer(config_file, config_class=TrainingConfigWithEvaluation)
       attach_evaluation(trainer)          # or attach_evaluation(trainer, EvaluationConfig(...))
       trainer.train(dataloader)

Either way every rank evaluates the trainer's own model (`trainer.model`) on its own
`parallel_context`, after Nanotron's `pre_training`, `train_step_logs`, `post_train_step`,
`post_save_checkpoint` and `post_training` of that trainer instance.
"""

import functools
from typing import Any, Callable, Optional, Type

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.asynchronous import evaluator_for
from lighteval_nanotron.hook.evaluator import TrainingEvaluator
from lighteval_nanotron.hook.training_config import TrainingConfigWithEvaluation
from lighteval_nanotron.hook.wandb_run import training_wandb
from lighteval_nanotron.nanotron_compat.console import print_each_record_once, quiet_loggers, quiet_nanotron
from lighteval_nanotron.nanotron_compat.imports import ensure_cuda_extensions
from lighteval_nanotron.options.hook import SECTION, EvaluationConfig
from lighteval_nanotron.tracking import details_logger, json_logger

ensure_cuda_extensions()  # Nanotron's models import flash-attn (main: grouped_gemm too): stand-ins on CPU only

from nanotron.trainer import DistributedTrainer  # noqa: E402

quiet_nanotron()  # Nanotron's weight bars, now that the trainer's modules are imported
quiet_loggers(json_logger.logger.name, details_logger.logger.name)  # paths: the log line per evaluation is enough

AFTER = ("post_train_step", "post_save_checkpoint", "post_training")
"""Trainer hooks after which the evaluator's method of the same name runs (with the trainer)."""
ATTACHED = "_lighteval_nanotron_attached"


def _wire(trainer: Any, config: Optional[EvaluationConfig]) -> Optional[TrainingEvaluator]:
    """Wrap the trainer instance's hooks. Without a `config` only W&B is handled (Nanotron's own
    `wandb.init` skipped unless the section asks for W&B); with one, the evaluator runs too."""
    if getattr(trainer, ATTACHED, False):
        raise ConfigError("attach_evaluation: this trainer already evaluates; attach at most once.")
    print_each_record_once()  # the trainer installed its root handler
    evaluator = evaluator_for(config) if config is not None else None
    original_pre_training = trainer.pre_training

    @functools.wraps(original_pre_training)
    def pre_training(*args: Any, **kwargs: Any) -> Any:
        with training_wandb(trainer, config) as run:
            value = original_pre_training(*args, **kwargs)
        if evaluator is not None:
            evaluator.wandb_run = run
            evaluator.pre_training(trainer)
        return value

    trainer.pre_training = pre_training
    setattr(trainer, ATTACHED, True)
    if evaluator is None:
        return None
    original_train_step_logs = trainer.train_step_logs

    @functools.wraps(original_train_step_logs)
    def train_step_logs(outputs: Any, loss_avg: Any, **kwargs: Any) -> None:
        """(GitHub main also passes `z_loss_avg` and `tbi_logs`.)"""
        original_train_step_logs(outputs=outputs, loss_avg=loss_avg, **kwargs)
        evaluator.train_step_logs(trainer, loss_avg)

    trainer.train_step_logs = train_step_logs
    for name in AFTER:
        setattr(trainer, name, _after(getattr(trainer, name), functools.partial(getattr(evaluator, name), trainer)))
    return evaluator


def _after(original: Callable[..., Any], extra: Callable[[], None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        value = original(*args, **kwargs)
        extra()
        return value

    return hooked


def attach_evaluation(trainer: Any, config: Optional[EvaluationConfig] = None) -> TrainingEvaluator:
    """Make an existing trainer instance evaluate; returns the evaluator (e.g. to read `failures`).

    `config` defaults to the trainer config's `lighteval_nanotron` section. Call it before
    `trainer.train(...)`, once.
    """
    config = config if config is not None else getattr(trainer.config, SECTION, None)
    if config is None:
        raise ConfigError(
            "attach_evaluation: the trainer's config has no lighteval_nanotron section. Build the trainer with "
            "config_class=TrainingConfigWithEvaluation and add the section, or pass an EvaluationConfig."
        )
    return _wire(trainer, config)


class EvaluatingTrainer(DistributedTrainer):
    """`DistributedTrainer` that evaluates at the steps of its config's `lighteval_nanotron:` section
    (`attach_evaluation` on itself; `self.evaluator`).

    Without that section it trains like `DistributedTrainer`, except that W&B starts only when the
    section lists the `wandb` logger (`hook.wandb_run`).
    """

    def __init__(
        self,
        config_or_config_file: Any,
        config_class: Type[TrainingConfigWithEvaluation] = TrainingConfigWithEvaluation,
        **kwargs: Any,
    ) -> None:
        super().__init__(config_or_config_file, config_class=config_class, **kwargs)
        self.evaluator: Optional[TrainingEvaluator] = _wire(self, getattr(self.config, SECTION, None))
