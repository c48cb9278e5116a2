"""Two ways to put evaluation into Nanotron's `DistributedTrainer`.

1. Subclass (the usual one): `EvaluatingTrainer(config_file)` reads the training YAML with its
   `lighteval_nanotron:` section and evaluates at the configured steps.

       trainer = EvaluatingTrainer("configs/tiny_cpu_train.yaml")
       trainer.train(dataloader)

2. An unmodified trainer built elsewhere (e.g. Nanotron's own `run_train.py`):

       trainer = DistributedTrainer(config_file, config_class=TrainingConfigWithEvaluation)
       attach_evaluation(trainer)          # or attach_evaluation(trainer, EvaluationConfig(...))
       trainer.train(dataloader)

Either way every rank evaluates the trainer's own model (`trainer.model`) on its own
`parallel_context`, through the hooks `pre_training`, `post_train_step`, `post_save_checkpoint`
and `post_training`.
"""

import functools
from typing import Any, Callable, Optional, Type

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.config import EvaluationConfig
from lighteval_nanotron.hook.evaluator import TrainingEvaluator
from lighteval_nanotron.hook.training_config import SECTION, TrainingConfigWithEvaluation
from lighteval_nanotron.hook.wandb_run import training_wandb
from lighteval_nanotron.nanotron_compat.imports import ensure_cuda_extensions

ensure_cuda_extensions()  # Nanotron's models import flash-attn (main: grouped_gemm too): stand-ins on CPU only

from nanotron.trainer import DistributedTrainer  # noqa: E402

HOOKS = ("pre_training", "post_train_step", "post_save_checkpoint", "post_training")


class EvaluatingTrainer(DistributedTrainer):
    """`DistributedTrainer` that evaluates at the steps of its config's `lighteval_nanotron:` section.

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
        section = getattr(self.config, SECTION, None)
        self.evaluator: Optional[TrainingEvaluator] = TrainingEvaluator(section) if section is not None else None

    def pre_training(self, *args: Any, **kwargs: Any) -> None:
        with training_wandb(self, getattr(self.config, SECTION, None)) as run:
            super().pre_training(*args, **kwargs)
        if self.evaluator is not None:
            self.evaluator.wandb_run = run
            self.evaluator.pre_training(self)

    def train_step_logs(self, outputs: Any, loss_avg: Any, **kwargs: Any) -> None:
        """(GitHub main also passes `z_loss_avg` and `tbi_logs`.)"""
        super().train_step_logs(outputs=outputs, loss_avg=loss_avg, **kwargs)
        if self.evaluator is not None:
            self.evaluator.train_step_logs(self, loss_avg)

    def post_train_step(self) -> None:
        super().post_train_step()
        if self.evaluator is not None:
            self.evaluator.post_train_step(self)

    def post_save_checkpoint(self) -> None:
        super().post_save_checkpoint()
        if self.evaluator is not None:
            self.evaluator.post_save_checkpoint(self)

    def post_training(self) -> None:
        super().post_training()
        if self.evaluator is not None:
            self.evaluator.post_training(self)


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
    if isinstance(trainer, EvaluatingTrainer) or getattr(trainer, "_lighteval_nanotron_attached", False):
        raise ConfigError("attach_evaluation: this trainer already evaluates; attach at most once.")
    evaluator = TrainingEvaluator(config)
    original_pre_training = trainer.pre_training

    @functools.wraps(original_pre_training)
    def pre_training(*args: Any, **kwargs: Any) -> Any:
        with training_wandb(trainer, config) as run:
            value = original_pre_training(*args, **kwargs)
        evaluator.wandb_run = run
        evaluator.pre_training(trainer)
        return value

    original_train_step_logs = trainer.train_step_logs

    @functools.wraps(original_train_step_logs)
    def train_step_logs(outputs: Any, loss_avg: Any, **kwargs: Any) -> None:
        original_train_step_logs(outputs=outputs, loss_avg=loss_avg, **kwargs)
        evaluator.train_step_logs(trainer, loss_avg)

    trainer.pre_training = pre_training
    trainer.train_step_logs = train_step_logs
    for name in HOOKS:
        if name == "pre_training":
            continue
        setattr(trainer, name, _after(getattr(trainer, name), functools.partial(getattr(evaluator, name), trainer)))
    trainer._lighteval_nanotron_attached = True
    return evaluator


def _after(original: Callable[..., Any], extra: Callable[[], None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        value = original(*args, **kwargs)
        extra()
        return value

    return hooked
