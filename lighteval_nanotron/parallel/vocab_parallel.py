"""Log-probabilities and greedy argmax over vocabulary-sharded logits.

Under tensor parallelism Nanotron's `lm_head` leaves each TP rank with `[..., vocab / tp]` logits
(TP rank r holds vocabulary ids `[r * shard, (r + 1) * shard)`). Everything here needs only small
reductions over the TP group (a max, a sum of exponentials, the target logit from its owning
shard, or the per-rank best candidate); the full vocabulary is never assembled on one rank.

`record_logits_width()` records the widest last dimension of any logits tensor these functions
see, so a test can assert that no rank ever handled full-vocabulary logits.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import EvaluationError


@dataclass
class LogitsWidthRecord:
    """Widest logits last-dimension seen while recording, and how many tensors were seen."""

    max_width: int = 0
    count: int = 0
    widths: list[int] = field(default_factory=list)


_RECORDS: list[LogitsWidthRecord] = []
_CHUNK_ROWS = 64


@contextlib.contextmanager
def record_logits_width() -> Iterator[LogitsWidthRecord]:
    """Record the last dimension of every logits tensor handled by this module inside the block."""
    record = LogitsWidthRecord()
    _RECORDS.append(record)
    try:
        yield record
    finally:
        _RECORDS.remove(record)


def _observe(logits: torch.Tensor) -> None:
    width = int(logits.shape[-1])
    for record in _RECORDS:
        record.max_width = max(record.max_width, width)
        record.count += 1
        record.widths.append(width)


def _tp_size(group: dist.ProcessGroup | None) -> int:
    return 1 if group is None else dist.get_world_size(group)


def _all_reduce(tensor: torch.Tensor, op: dist.ReduceOp, group: dist.ProcessGroup | None) -> torch.Tensor:
    if _tp_size(group) > 1:
        dist.all_reduce(tensor, op=op, group=group)
    return tensor


def target_logprobs(
    shard_logits: torch.Tensor,
    targets: torch.Tensor,
    tp_group: dist.ProcessGroup | None,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of `targets` and whether each target is the greedy choice.

    `shard_logits` is `[m, vocab / tp]` (this TP rank's slice of m positions), `targets` `[n]`
    global vocabulary ids, `rows` `[n]` the position each target reads (None: target k reads
    position k, n = m), so a position read by several targets (the choices after one context)
    is normalised once and never copied. Two all-reduces over the TP group: MAX of `[m]`, then
    SUM of `[m + n]` (the sums of exponentials, and the target logits contributed by their owning
    shard only). "Greedy" means the target's logit equals the maximum over the whole vocabulary.
    """
    _observe(shard_logits)
    logits = shard_logits.float()
    shard = logits.shape[-1]
    _check_targets(targets, shard * _tp_size(tp_group))
    start = shard * (dist.get_rank(tp_group) if _tp_size(tp_group) > 1 else 0)
    local = targets.to(logits.device) - start
    owned = (local >= 0) & (local < shard)
    row_max = _all_reduce(logits.max(dim=-1).values, dist.ReduceOp.MAX, tp_group)
    # in chunks of rows: no temporary as large as the logits (cache-sized, no page faults)
    sum_exp = (
        torch.cat(
            [
                torch.exp(chunk - chunk_max[:, None]).sum(dim=-1)
                for chunk, chunk_max in zip(logits.split(_CHUNK_ROWS), row_max.split(_CHUNK_ROWS))
            ]
        )
        if logits.shape[0]
        else logits.new_zeros(0)
    )
    column = local.clamp(0, shard - 1)
    if rows is None:
        picked = logits.gather(-1, column[:, None]).squeeze(-1)
    else:
        rows = rows.to(logits.device)
        picked = logits[rows, column]
    target_logit = torch.where(owned, picked, torch.zeros_like(picked))
    sums = _all_reduce(torch.cat([sum_exp, target_logit]), dist.ReduceOp.SUM, tp_group)
    sum_exp, target_logit = sums[: logits.shape[0]], sums[logits.shape[0] :]
    if rows is not None:
        row_max, sum_exp = row_max[rows], sum_exp[rows]
    logprobs = target_logit - row_max - torch.log(sum_exp)
    is_greedy = target_logit >= row_max
    return logprobs, is_greedy


def _check_targets(targets: torch.Tensor, vocab_size: int) -> None:
    """Every target must be owned by exactly one shard: a target no shard owns would get the made-up
    logit 0 (and a finite log-probability). The same check on every TP rank (same targets), so they
    all raise together; the engine refuses such ids at setup, so this is the last line."""
    if targets.numel() and not bool(((targets >= 0) & (targets < vocab_size)).all()):
        wrong = targets[(targets < 0) | (targets >= vocab_size)][0].item()
        raise EvaluationError(
            f"target token id {wrong} is outside the vocabulary of {vocab_size} ids that the logits cover: its "
            "log-probability does not exist. Use the tokenizer the model was trained with."
        )


def greedy_tokens(shard_logits: torch.Tensor, tp_group: dist.ProcessGroup | None) -> torch.Tensor:
    """Global argmax over a sharded vocabulary for each of `n` rows (`[n, vocab / tp]` -> `[n]`)."""
    return greedy_choice(shard_logits, tp_group)[0]


def greedy_choice(shard_logits: torch.Tensor, tp_group: dist.ProcessGroup | None) -> tuple[torch.Tensor, torch.Tensor]:
    """`(ids, max_logit)`: the global argmax over a sharded vocabulary for each of `n` rows, and
    the maximum logit itself, which is NaN when any shard of the row holds a NaN (max propagates
    it) and inf when a logit is: a free non-finite check.

    Each TP rank offers its best `(value, global id)`; one all-gather of `[tp, 2, n]`; ties go to
    the lowest vocabulary id, as `torch.argmax` on the full vocabulary does. A row with a NaN gets
    the id of its first NaN on every layout (the TP1 choice; NaN equals nothing, so without this
    no shard would match and the id would be a cast infinity).
    """
    _observe(shard_logits)
    logits = shard_logits.float()
    values, local_ids = logits.max(dim=-1)
    tp = _tp_size(tp_group)
    if tp == 1:
        return local_ids, values
    start = logits.shape[-1] * dist.get_rank(tp_group)
    mine = torch.stack([values.double(), (local_ids + start).double()])
    gathered = [torch.empty_like(mine) for _ in range(tp)]
    dist.all_gather(gathered, mine, group=tp_group)
    stacked = torch.stack(gathered)  # [tp, 2, n]
    best_value = stacked[:, 0].max(dim=0).values
    best = (stacked[:, 0] == best_value) | (stacked[:, 0].isnan() & best_value.isnan())
    ids = torch.where(best, stacked[:, 1], torch.full_like(stacked[:, 1], float("inf")))
    return ids.min(dim=0).values.long(), best_value


def full_vocabulary(shard_logits: torch.Tensor, tp_group: dist.ProcessGroup | None) -> torch.Tensor:
    """`[n, vocab / tp]` shards -> `[n, vocab]` fp32 on every TP rank (one all-gather). Only for
    sampling, which needs the whole distribution (top-p); greedy and scoring never call it."""
    logits = shard_logits.float().contiguous()
    tp = _tp_size(tp_group)
    if tp == 1:
        return logits
    parts = [torch.empty_like(logits) for _ in range(tp)]
    dist.all_gather(parts, logits, group=tp_group)
    return torch.cat(parts, dim=-1)
