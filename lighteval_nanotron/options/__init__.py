"""Every option declared once: `EvaluationOptions` (what the hook's section and `eval` share) and
the groups it includes, and `LayoutOptions` (where `eval` and the asynchronous evaluations run);
the `eval` flags (`options.flags`), a launched evaluation's arguments and docs/options.md
(`options.reference`) are generated from these dataclasses."""

from lighteval_nanotron.options.base import Options, field_docs
from lighteval_nanotron.options.batching import BatchingOptions
from lighteval_nanotron.options.evaluation import EvaluationOptions
from lighteval_nanotron.options.layout import LayoutOptions
from lighteval_nanotron.options.tokenization import TokenizationOptions
from lighteval_nanotron.options.tracking import DEFAULT_LOGGERS, LOGGER_NAMES, WANDB_MODES, TrackingOptions

__all__ = [
    "BatchingOptions",
    "DEFAULT_LOGGERS",
    "LOGGER_NAMES",
    "WANDB_MODES",
    "EvaluationOptions",
    "LayoutOptions",
    "Options",
    "TokenizationOptions",
    "TrackingOptions",
    "field_docs",
]
