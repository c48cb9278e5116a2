"""A random tiny Hugging Face Qwen2 and Qwen2-MoE, converted to current Nanotron's Qwen2 and
evaluated with `lighteval-nanotron eval`: every document's log-likelihood equals transformers' on
the same tokens (fp32, within 1e-4), at PP2 and at TP2. Needs GitHub main."""

from __future__ import annotations

import pytest

from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from lighteval_nanotron.convert import convert_hf_to_nanotron
from lighteval_nanotron.models.families.qwen2.tiny import tiny_hf_qwen2, tiny_hf_qwen2_moe
from tests.checkpoint_eval.details_check import max_logprob_difference, read_details
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_main import requires_qwen2
from tests.helpers.tiny_model import tiny_tokenizer

pytestmark = requires_qwen2
TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"
TOLERANCE = 1e-4


def _cli_main(argv: list) -> int:
    from lighteval_nanotron.cli.main import main

    return main(argv)


@pytest.mark.parametrize(
    ("variant", "layout"), [("dense", ("--pp", "2")), ("moe", ("--tp", "2"))], ids=["dense-pp2", "moe-tp2"]
)
def test_converted_qwen2_scores_like_transformers(tmp_path, variant, layout):
    model = tiny_hf_qwen2(tie=True) if variant == "dense" else tiny_hf_qwen2_moe()
    model.save_pretrained(tmp_path / "hf")
    tiny_tokenizer().save_pretrained(tmp_path / "hf")
    convert_hf_to_nanotron(tmp_path / "hf", tmp_path / "nanotron")
    converted = read_checkpoint_model(tmp_path / "nanotron").model_config
    assert converted.attention_bias and not converted.rope_interleaved
    assert (converted.moe_config is not None) == (variant == "moe")
    out = tmp_path / "out"
    argv = ["eval", str(tmp_path / "nanotron"), "--cpu", "--tasks", TASKS, "--max-samples", "4", "--data-dir",
            "bundled", "--output-dir", str(out), *layout]  # fmt: skip
    assert run_distributed(_cli_main, 2, argv, timeout=240) == [0, 0]
    (step_dir,) = (out / "details" / "converted" / "nanotron").iterdir()
    assert max_logprob_difference(model, read_details(step_dir), tiny_tokenizer()) < TOLERANCE
