"""Fixtures of the engine tests: the tiny random Llama and Starcoder2 checkpoints (TP1/PP1, fp32) and the engine's
results on it at TP1/PP1 with every switch on (the reference of the layout tests)."""

import pytest

from tests.helpers.tiny_model import tiny_checkpoint, tiny_starcoder2_checkpoint  # noqa: F401  (pytest fixtures)
from tests.models.engine_cases import run_engine


@pytest.fixture(scope="session")
def baseline(tiny_checkpoint) -> dict:  # noqa: F811
    return run_engine(tiny_checkpoint, 1, 1, 1)[0]
