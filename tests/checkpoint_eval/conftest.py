"""Fixtures of the checkpoint-evaluation tests: tiny Hugging Face Llamas converted to Nanotron once per session."""

from pathlib import Path

import pytest

from tests.checkpoint_eval.tiny_hf import convert_tiny


@pytest.fixture(scope="session")
def tiny_converted(tmp_path_factory) -> tuple:
    """(transformers model, Nanotron checkpoint folder) of the seed-0 tiny Llama."""
    return convert_tiny(Path(tmp_path_factory.mktemp("tiny_seed0")), seed=0)


@pytest.fixture(scope="session")
def tiny_converted_other(tmp_path_factory) -> tuple:
    """The same architecture with other weights (seed 1): a later checkpoint of the same run."""
    return convert_tiny(Path(tmp_path_factory.mktemp("tiny_seed1")), seed=1)
