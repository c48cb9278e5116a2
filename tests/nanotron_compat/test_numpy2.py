"""Nanotron checkpoints under numpy 2 (`nanotron_compat.numpy2`): saves write plain-integer shapes, loads
read them and numpy 2's `np.int64(N)` form, and a checkpoint saved at one layout evaluates at another."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from lighteval_nanotron.nanotron_compat.numpy2 import format_shape, parse_shape
from tests.helpers.distributed import parallel_context, run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (fixture)

PLAIN_SHAPE = re.compile(r"\((\d+, )*\d+,?\)")
INPUT_IDS = [[5, 17, 300, 42, 7, 99, 1000, 3], [8, 8, 250, 13, 600, 2, 71, 19]]


def test_shapes_parse_in_both_forms_and_are_written_plain():
    assert parse_shape("(128, 64)") == (128, 64)
    assert parse_shape("(np.int64(128), 64)") == (128, 64)  # an unadapted Nanotron under numpy 2
    assert parse_shape("(np.int64(192),)") == (192,)
    assert parse_shape("(numpy.int32(3), np.uint64(4))") == (3, 4)
    assert parse_shape("()") == ()
    for bad in ("(128, x)", "[128, 64]", "(np.float64(1.5), 2)"):
        with pytest.raises(ValueError, match="unsharded_shape"):
            parse_shape(bad)
    assert format_shape((np.int64(128), 64)) == "(128, 64)"
    assert format_shape(torch.Size([192])) == "(192,)"


def _shape_texts(folder: Path) -> dict:
    from safetensors import safe_open

    texts = {}
    for path in sorted(folder.rglob("*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        if "unsharded_shape" in metadata:
            texts[str(path.relative_to(folder))] = metadata["unsharded_shape"]
    return texts


def _as_numpy2_form(folder: Path) -> None:
    """Rewrite every saved shape the way Nanotron (unadapted) writes it under numpy 2: `(np.int64(N), ...)`."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    for path in folder.rglob("*.safetensors"):
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        if "unsharded_shape" in metadata:
            sizes = parse_shape(metadata["unsharded_shape"])
            metadata["unsharded_shape"] = str(tuple(np.int64(size) for size in sizes))
            save_file(tensors, str(path), metadata=metadata)


def _resave(source: str, target: str, tp: int) -> None:
    """run_distributed worker: load `source` at TP `tp` and save it again to `target` (sharded over TP)."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint, save_nanotron_checkpoint

    context = parallel_context(tp, 1, 1)
    model, model_config = load_nanotron_checkpoint(source, context, dtype=torch.float32)
    save_nanotron_checkpoint(model, model_config, context, target)


def _logits(path: str, tp: int, pp: int):
    """run_distributed worker: full logits of the checkpoint at (tp, pp) on fixed tokens (None off the output stage)."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from tests.helpers.forward import full_logits

    context = parallel_context(tp, pp, 1)
    model, _ = load_nanotron_checkpoint(path, context, dtype=torch.float32)
    return full_logits(model, context, torch.tensor(INPUT_IDS))


def _only(results: list) -> torch.Tensor:
    (logits,) = [result for result in results if result is not None][:1]
    return logits


def test_saved_at_tp2_evaluates_at_pp2_in_both_shape_forms(tiny_checkpoint, tmp_path):  # noqa: F811
    saved = tmp_path / "tp2"
    run_distributed(_resave, 2, str(tiny_checkpoint), str(saved), 2, timeout=180)
    texts = _shape_texts(saved / "model")
    assert len(texts) >= 8 and any("qkv_proj" in name for name in texts)  # the fused, numpy-sized weights
    assert all(PLAIN_SHAPE.fullmatch(text) for text in texts.values()), texts

    reference = _only(run_distributed(_logits, 1, str(tiny_checkpoint), 1, 1, timeout=120))
    at_pp2 = _only(run_distributed(_logits, 2, str(saved), 1, 2, timeout=180))
    torch.testing.assert_close(at_pp2, reference, rtol=0, atol=1e-5)

    _as_numpy2_form(saved / "model")
    assert any("np.int64(" in text for text in _shape_texts(saved / "model").values())
    from_numpy2_form = _only(run_distributed(_logits, 2, str(saved), 1, 2, timeout=180))
    torch.testing.assert_close(from_numpy2_form, reference, rtol=0, atol=1e-5)
