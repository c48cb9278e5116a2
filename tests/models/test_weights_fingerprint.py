"""The weights' fingerprint is the checkpoint's, whatever the layout and dtype the model is loaded
in: computed from the model at TP2xPP2 (embeddings tied across stages, norms tied across TP ranks),
at DP2 and in bfloat16, it equals the fingerprint of the checkpoint's files read one by one; one
changed value changes it. Starcoder2's row-parallel biases exist on TP rank 0 only."""

import hashlib
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tests.helpers.distributed import parallel_context, run_distributed
from tests.helpers.tiny_model import tiny_checkpoint, tiny_starcoder2_checkpoint  # noqa: F401  (session fixtures)


def _fingerprint(checkpoint: str, tp: int, pp: int, dp: int, dtype: str) -> str:
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.weights_fingerprint import weights_fingerprint

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context, dtype=getattr(torch, dtype))
    return weights_fingerprint(model, context)


def _files_fingerprint(checkpoint: Path) -> str:
    """The fingerprint from the checkpoint's files (TP1: one file per weight, tied weights once)."""
    total = squares = 0
    files = sorted((checkpoint / "model").rglob("*.safetensors"))
    assert files
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            bits = handle.get_tensor("data").to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
        total, squares = total + int(bits.sum()), squares + int((bits * bits).sum())
    return hashlib.sha256(f"{total}:{squares}".encode()).hexdigest()[:32]


def _changed_copy(checkpoint: Path, folder: Path) -> Path:
    shutil.copytree(checkpoint, folder)
    path = next(p for p in sorted((folder / "model").rglob("*.safetensors")) if "mlp" in str(p))
    with safe_open(str(path), framework="pt") as handle:
        metadata, tensor = handle.metadata(), handle.get_tensor("data")
    tensor.view(-1)[0] *= 1.5
    save_file({"data": tensor}, str(path), metadata=metadata)
    return folder


@pytest.mark.parametrize(("tp", "pp", "dp", "dtype"), [(2, 2, 1, "float32"), (1, 1, 2, "bfloat16")])
def test_the_llama_fingerprint_is_the_checkpoints_at_any_layout_and_dtype(tiny_checkpoint, tp, pp, dp, dtype):
    found = run_distributed(_fingerprint, tp * pp * dp, str(tiny_checkpoint), tp, pp, dp, dtype, timeout=120)
    assert set(found) == {_files_fingerprint(tiny_checkpoint)}  # every rank, the same


def test_one_changed_value_changes_it_and_starcoder2_biases_count_once(
    tiny_checkpoint, tiny_starcoder2_checkpoint, tmp_path
):
    changed = _changed_copy(tiny_checkpoint, tmp_path / "changed")
    (fingerprint,) = run_distributed(_fingerprint, 1, str(changed), 1, 1, 1, "float32", timeout=120)
    assert fingerprint == _files_fingerprint(changed) != _files_fingerprint(tiny_checkpoint)
    assert any("bias" in str(p) for p in (tiny_starcoder2_checkpoint / "model").rglob("*.safetensors"))
    found = run_distributed(_fingerprint, 2, str(tiny_starcoder2_checkpoint), 2, 1, 1, "float32", timeout=120)
    assert set(found) == {_files_fingerprint(tiny_starcoder2_checkpoint)}
