"""Fixtures for the conversion tests: tiny Llama checkpoints saved once per module."""

from pathlib import Path

import pytest

from tests.convert.tiny_llama import tiny_hf_llama


@pytest.fixture(scope="module", params=[True, False], ids=["tied", "untied"])
def hf_llama(request, tmp_path_factory) -> tuple:
    """(model, folder): a tiny random GQA Llama saved with save_pretrained, tied and untied."""
    model = tiny_hf_llama(tie=request.param)
    folder = tmp_path_factory.mktemp("hf_llama")
    model.save_pretrained(folder)
    return model, Path(folder)
