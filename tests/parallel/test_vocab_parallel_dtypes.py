"""Vocabulary-parallel log-probs and argmax compute in fp32 whatever the logits' dtype, at TP1 and
over a TP2 gloo group: half-precision logits give what fp32 log-softmax gives on the same values."""

from __future__ import annotations

import pytest
import torch

from lighteval_nanotron.parallel.vocab_parallel import greedy_tokens, target_logprobs
from tests.helpers.distributed import run_distributed

VOCAB, ROWS = 64, 5


def _logits(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits large enough that exp() overflows fp16 and sums of exp() lose bits in bf16."""
    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(ROWS, VOCAB, generator=generator) * 4 + 20).to(dtype)
    targets = torch.randint(0, VOCAB, (ROWS,), generator=generator)
    targets[0] = int(logits[0].float().argmax())
    return logits, targets


def _expected(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    full = logits.double().log_softmax(-1)
    return full.gather(-1, targets[:, None]).squeeze(-1), logits.float().argmax(-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_tp1_log_probs_in_fp32(dtype):
    logits, targets = _logits(dtype)
    logprobs, greedy = target_logprobs(logits, targets, None)
    expected, argmax = _expected(logits, targets)
    assert logprobs.dtype == torch.float32 and torch.isfinite(logprobs).all()
    torch.testing.assert_close(logprobs.double(), expected, atol=1e-5, rtol=1e-6)
    assert greedy.tolist() == (argmax == targets).tolist() and greedy[0]
    assert greedy_tokens(logits, None).tolist() == argmax.tolist()


def _sharded(dtype_name: str) -> tuple[list[float], list[bool], list[int]]:
    import torch.distributed as dist

    from tests.helpers.distributed import parallel_context

    context = parallel_context(2, 1, 1)
    logits, targets = _logits(getattr(torch, dtype_name))
    shard = logits.chunk(2, dim=-1)[dist.get_rank(context.tp_pg)].contiguous()
    logprobs, greedy = target_logprobs(shard, targets, context.tp_pg)
    return logprobs.tolist(), greedy.tolist(), greedy_tokens(shard, context.tp_pg).tolist()


def test_tp2_half_precision_shards_in_fp32():
    for dtype in (torch.bfloat16, torch.float16):
        logits, targets = _logits(dtype)
        expected, argmax = _expected(logits, targets)
        for logprobs, greedy, tokens in run_distributed(_sharded, 2, str(dtype).removeprefix("torch."), timeout=60):
            torch.testing.assert_close(torch.tensor(logprobs, dtype=torch.float64), expected, atol=1e-5, rtol=1e-6)
            assert greedy == (argmax == targets).tolist() and tokens == argmax.tolist()
