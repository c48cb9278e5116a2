"""Evaluation inside Nanotron training: the `lighteval_nanotron:` config section and the trainer hook.

    from lighteval_nanotron.hook import EvaluatingTrainer
    trainer = EvaluatingTrainer("configs/tiny_cpu_train.yaml")   # YAML with a lighteval_nanotron: section
    trainer.train(dataloader)

`attach_evaluation(trainer)` does the same for an unmodified `DistributedTrainer` built with
`config_class=TrainingConfigWithEvaluation`. See docs/hook.md.
"""

from typing import Any

from lighteval_nanotron.hook.evaluator import TrainingEvaluator
from lighteval_nanotron.hook.schedule import EvalSchedule, Moment
from lighteval_nanotron.options.hook import EvaluationConfig

_NANOTRON_EXPORTS = {
    "EvaluatingTrainer": "lighteval_nanotron.hook.trainer",
    "attach_evaluation": "lighteval_nanotron.hook.trainer",
    "TrainingConfigWithEvaluation": "lighteval_nanotron.hook.training_config",
    "load_training_config": "lighteval_nanotron.hook.training_config",
}


def __getattr__(name: str) -> Any:
    """Names that import Nanotron load on first use, so that `import lighteval_nanotron.hook` stays light."""
    if name in _NANOTRON_EXPORTS:
        import importlib

        return getattr(importlib.import_module(_NANOTRON_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EvalSchedule",
    "EvaluatingTrainer",
    "EvaluationConfig",
    "Moment",
    "TrainingConfigWithEvaluation",
    "TrainingEvaluator",
    "attach_evaluation",
    "load_training_config",
]
