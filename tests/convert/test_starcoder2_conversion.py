"""A random tiny Hugging Face Starcoder2 (grouped-query and multi-query), converted
to Nanotron and evaluated with `lighteval-nanotron eval`: every document's log-likelihood equals
transformers' on the same tokens (fp32, within 1e-4), at TP2 and at PP2."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from lighteval_nanotron.convert import convert_hf_to_nanotron
from lighteval_nanotron.errors import CheckpointError, UnsupportedModelError
from lighteval_nanotron.models.families import Starcoder2Family
from lighteval_nanotron.models.families.starcoder2.tiny import tiny_hf_starcoder2
from tests.checkpoint_eval.details_check import max_logprob_difference, read_details
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_versions import STARCODER2_CONFIG_ON_MAIN, only_on_main, skip_on_main
from tests.helpers.tiny_model import tiny_tokenizer

TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"
TOLERANCE = 1e-4


def _convert(folder: Path, kv_heads: int):
    model = tiny_hf_starcoder2(kv_heads)
    model.save_pretrained(folder / "hf")
    tiny_tokenizer().save_pretrained(folder / "hf")
    convert_hf_to_nanotron(folder / "hf", folder / "nanotron")
    return model, folder / "nanotron"


def _cli_main(argv: list) -> int:
    from lighteval_nanotron.cli.main import main

    return main(argv)


@skip_on_main(STARCODER2_CONFIG_ON_MAIN)
@pytest.mark.parametrize(
    ("kv_heads", "layout"),
    [(2, ("--tp", "2")), (1, ("--pp", "2"))],
    ids=["gqa-tp2", "mqa-pp2"],
)
def test_converted_starcoder2_scores_like_transformers(tmp_path, kv_heads, layout):
    model, checkpoint = _convert(tmp_path, kv_heads)
    converted = read_checkpoint_model(checkpoint)
    assert converted.family is Starcoder2Family
    assert converted.model_config.multi_query == (kv_heads == 1) and converted.model_config.rope_theta == 50000
    out = tmp_path / "out"
    argv = ["eval", str(checkpoint), "--cpu", "--tasks", TASKS, "--max-samples", "4", "--data-dir", "bundled",
            "--output-dir", str(out), *layout]  # fmt: skip
    assert run_distributed(_cli_main, 2, argv, timeout=240) == [0, 0]
    (step_dir,) = (out / "details" / "converted" / "nanotron").iterdir()
    assert max_logprob_difference(model, read_details(step_dir), tiny_tokenizer()) < TOLERANCE


@only_on_main
def test_converting_under_main_is_refused_naming_the_fix(tmp_path):
    """Main's Config (the converted config.yaml) cannot hold a Starcoder2: one message, no AttributeError."""
    with pytest.raises(UnsupportedModelError) as refused:
        _convert(tmp_path, kv_heads=2)
    message = str(refused.value)
    assert message.startswith("Model config class Starcoder2Config (starcoder2) cannot go into a training config")
    assert "Train or convert Starcoder2 with Nanotron 0.4" in message and "llama (LlamaConfig" in message
    assert not (tmp_path / "nanotron").exists()  # refused before any weight is read


def test_sliding_window_and_untied_lm_head_are_refused(tmp_path):
    model = tiny_hf_starcoder2(2)
    model.config.sliding_window = 64
    model.save_pretrained(tmp_path / "window")
    with pytest.raises(CheckpointError, match="sliding_window=64 < max_position_embeddings=512"):
        convert_hf_to_nanotron(tmp_path / "window", tmp_path / "nanotron")
    tiny_hf_starcoder2(2, tie=False).save_pretrained(tmp_path / "untied")
    with pytest.raises(CheckpointError, match="always ties"):
        convert_hf_to_nanotron(tmp_path / "untied", tmp_path / "nanotron")
    assert not (tmp_path / "nanotron").exists()
