"""A fingerprint of a Nanotron model's weights that does not depend on how they are laid out.

A step's results file may merge several evaluations (other tasks, a backfill beside the hook):
they must all have measured the same weights. The path of a checkpoint is no identity (folders
move, the hook evaluates the live model), so the weights name themselves: every value, rounded
to bfloat16, as its 16-bit pattern, summed twice (the patterns and their squares) in integers.
Integer sums are exact and ignore order, so the training's live model at TP2/PP2 and its saved
checkpoint loaded at TP1, in float32 or bfloat16, give the same fingerprint, while two different
checkpoints (two runs, two steps) differ in millions of values and so in the sums.

Each value counts once in the world: data-parallel replicas on DP rank 0 only; a weight tied
across ranks (embeddings across pipeline stages, norms across TP ranks in training) on the
first rank of its tie; a TP-sharded weight by every TP rank's shard; any other weight on TP
rank 0 (a row-parallel bias exists only there). Zero padding of a vocabulary adds nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.distributed as dist

from lighteval_nanotron.parallel.once import from_every_rank

_CHUNK = 1 << 22  # values per chunk: each chunk's sums are exact in int64 (2^22 * 2^32 < 2^63)


def weights_fingerprint(model: torch.nn.Module, parallel_context: Any) -> str:
    """The fingerprint of `model`'s weights over every rank of `parallel_context` (collective on
    its world group): 32 hex digits (of the SHA-256 of the sums), the same on every rank."""
    total = squares = 0
    if dist.get_rank(parallel_context.dp_pg) == 0:
        tp_rank = dist.get_rank(parallel_context.tp_pg)
        for param in model.parameters():
            if _counted_here(param, tp_rank):
                part_total, part_squares = _sums(param.detach())
                total, squares = total + part_total, squares + part_squares
    parts = from_every_rank((total, squares), parallel_context.world_pg)
    sums = f"{sum(t for t, _ in parts)}:{sum(s for _, s in parts)}"
    return hashlib.sha256(sums.encode()).hexdigest()[:32]


def _counted_here(param: torch.nn.Parameter, tp_rank: int) -> bool:
    if getattr(param, "is_tied", False):
        return dist.get_rank() == min(param.get_tied_info().global_ranks)
    if getattr(param, "is_sharded", False):
        return True
    return tp_rank == 0


def _sums(tensor: torch.Tensor) -> tuple[int, int]:
    """(sum of the bfloat16 bit patterns, sum of their squares), exact."""
    total = squares = 0
    for chunk in tensor.reshape(-1).split(_CHUNK):
        bits = chunk.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
        total += int(bits.sum())
        squares += int((bits * bits).sum())
    return total, squares
