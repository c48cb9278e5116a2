"""Evaluate saved Nanotron checkpoints at any TP/PP/DP layout: one folder, or every step of a
training run in step order (backfill). The `lighteval-nanotron eval` command is a thin layer over
`evaluate_checkpoints`. See docs/eval.md."""

from lighteval_nanotron.checkpoint_eval.config import CheckpointEvalConfig
from lighteval_nanotron.checkpoint_eval.discovery import CheckpointInfo, checkpoint_info, find_checkpoints
from lighteval_nanotron.checkpoint_eval.runner import CheckpointEvalReport, evaluate_checkpoints

__all__ = [
    "CheckpointEvalConfig",
    "CheckpointEvalReport",
    "CheckpointInfo",
    "checkpoint_info",
    "evaluate_checkpoints",
    "find_checkpoints",
]
