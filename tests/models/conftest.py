"""Fixtures of the engine tests: the tiny random Llama checkpoint (TP1/PP1, fp32)."""

from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)
