"""Fixtures of the engine tests: the tiny random Llama and Starcoder2 checkpoints (TP1/PP1, fp32)."""

from tests.helpers.tiny_model import tiny_checkpoint, tiny_starcoder2_checkpoint  # noqa: F401  (pytest fixtures)
