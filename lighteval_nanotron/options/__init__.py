"""Every option declared once: `EvaluationOptions` (what the hook's section and `eval` share) and
the groups it includes; the `eval` flags (`options.flags`) and docs/options.md
(`options.reference`) are generated from these dataclasses."""

from lighteval_nanotron.options.base import Options, field_docs
from lighteval_nanotron.options.evaluation import EvaluationOptions
from lighteval_nanotron.options.tokenization import TokenizationOptions
from lighteval_nanotron.options.tracking import DEFAULT_LOGGERS, LOGGER_NAMES, WANDB_MODES, TrackingOptions

__all__ = [
    "DEFAULT_LOGGERS",
    "LOGGER_NAMES",
    "WANDB_MODES",
    "EvaluationOptions",
    "Options",
    "TokenizationOptions",
    "TrackingOptions",
    "field_docs",
]
