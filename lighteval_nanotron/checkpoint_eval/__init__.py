"""Evaluate saved Nanotron checkpoints at any TP/PP/DP layout: one folder, every step of a
training run in step order (backfill), or a running training's folder as it fills (`watch`). The
`lighteval-nanotron eval` command is a thin layer over `evaluate_checkpoints` and
`watch_checkpoints`; `launch/` starts such an evaluation elsewhere (the hook's asynchronous mode).
See docs/eval.md."""

from lighteval_nanotron.checkpoint_eval.discovery import CheckpointInfo, checkpoint_info, find_checkpoints
from lighteval_nanotron.checkpoint_eval.runner import CheckpointEvalReport, evaluate_checkpoints
from lighteval_nanotron.checkpoint_eval.watch import WatchReport, watch_checkpoints
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig

__all__ = [
    "CheckpointEvalConfig",
    "CheckpointEvalReport",
    "CheckpointInfo",
    "checkpoint_info",
    "evaluate_checkpoints",
    "WatchReport",
    "find_checkpoints",
    "watch_checkpoints",
]
