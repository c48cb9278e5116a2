"""The Nanotron Llama builds, loads and runs on CPU at every layout, matching a plain-PyTorch reference."""

import pytest
import torch

from tests.helpers.distributed import LAYOUTS, parallel_context, run_distributed
from tests.helpers.forward import full_logits
from tests.helpers.reference import reference_logits
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (session fixture)


def _input_ids() -> torch.Tensor:
    return torch.randint(0, 1024, (3, 17), generator=torch.Generator().manual_seed(0))


def _load_and_forward(checkpoint: str, tp: int, pp: int, dp: int):
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    return full_logits(model, context, _input_ids())


@pytest.mark.parametrize("tp,pp,dp", LAYOUTS, ids=[f"tp{t}-pp{p}-dp{d}" for t, p, d in LAYOUTS])
def test_forward_matches_reference(tiny_checkpoint, tp, pp, dp):
    expected = reference_logits(tiny_checkpoint, _input_ids())
    results = run_distributed(_load_and_forward, tp * pp * dp, str(tiny_checkpoint), tp, pp, dp, timeout=120)
    outputs = [logits for logits in results if logits is not None]
    assert len(outputs) == tp * dp  # every TP rank of the last stage, in each replica
    for logits in outputs:
        torch.testing.assert_close(logits, expected, atol=1e-4, rtol=0)
