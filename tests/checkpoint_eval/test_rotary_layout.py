"""The RoPE pair layout a Llama checkpoint's q/k rows are written for is the one read back, under
either Nanotron: a model config without `rope_interleaved` (Nanotron 0.4's, and the converter's
under 0.4) means interleaved pairs also under current Nanotron, whose `LlamaConfig` defaults it to
false (read with that default, every converted or 0.4-trained Llama scored wrong under main at
every layout); a built layer that rotates otherwise than recorded is refused before evaluating."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from lighteval_nanotron.checkpoints.format import CheckpointModel, read_checkpoint_model
from lighteval_nanotron.errors import UnsupportedModelError
from lighteval_nanotron.models.families.llama.conversion import nanotron_config_from_hf
from tests.checkpoint_eval.tiny_hf import ROPE_THETA, convert_tiny, tiny_hf_llama
from tests.helpers.distributed import parallel_context, run_distributed


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return convert_tiny(tmp_path_factory.mktemp("rotary_layout"), seed=0)


def _recorded_fields(**extra) -> dict:
    config, rope_theta = nanotron_config_from_hf(tiny_hf_llama(0).config.to_dict())
    assert "rope_interleaved" not in config  # as Nanotron 0.4 records a Llama
    return {**config, "rope_theta": rope_theta, **extra}


def test_unrecorded_pair_layout_reads_as_interleaved_pairs():
    assert CheckpointModel.from_fields(_recorded_fields()).rotary_layout == (ROPE_THETA, True)
    assert CheckpointModel.from_fields(_recorded_fields(rope_interleaved=False)).rotary_layout == (ROPE_THETA, False)


def test_converted_checkpoint_records_the_layout_of_its_weights(converted):
    _, folder = converted
    assert json.loads((folder / "model_config.json").read_text()).get("rope_interleaved", True) is True
    assert read_checkpoint_model(folder).rotary_layout == (ROPE_THETA, True)


def _logits_and_refusal(folder) -> tuple[torch.Tensor, str]:
    """TP1 logits of the converted checkpoint, and the refusal of the same built model checked
    against a record of the other pair layout."""
    from lighteval_nanotron.checkpoints.nanotron_builder import check_built_rotary, load_nanotron_checkpoint
    from tests.helpers.forward import full_logits

    context = parallel_context(1, 1, 1)
    model, _ = load_nanotron_checkpoint(folder, context)
    ids = torch.randint(0, 1024, (2, 11), generator=torch.Generator().manual_seed(3))
    logits = full_logits(model, context, ids)
    recorded = read_checkpoint_model(folder)
    check_built_rotary(model, recorded)  # what was built is what is recorded
    config = recorded.model_config
    if hasattr(config, "rope_interleaved"):
        config = dataclasses.replace(config, rope_interleaved=False)
    try:
        check_built_rotary(model, CheckpointModel(config, recorded.rope_theta, rope_interleaved=False))
    except UnsupportedModelError as error:
        return logits, str(error)
    return logits, ""


def test_converted_llama_equals_transformers_and_another_layout_is_refused(converted):
    model, folder = converted
    ((logits, refusal),) = run_distributed(_logits_and_refusal, 1, folder, timeout=180)
    ids = torch.randint(0, 1024, (2, 11), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(logits, model(ids).logits, atol=1e-4, rtol=0)
    assert "would score every document wrong" in refusal and "(50000.0, False)" in refusal
