"""Held-out loss on the live model: full windows through the pipeline stages, the targets'
log-probs from vocabulary-sharded logits, one sum per window, gathered once.

Every window is `sequence_length + 1` tokens, so rows are full: no padding and no packing needed.
Each DP replica scores one contiguous share of the windows; a micro-batch is as many whole
windows as `tokens_per_batch` holds (at least one, and at least `min_batches` micro-batches per
replica when there are enough windows, so pipeline stages overlap). Decoder layers run through the
family's layer view with causal attention (`CausalAttention`: positions 0..L-1 of each row, as the
trainer's Llama forward), position-wise parts chunked as the scoring path does on CPU; `lm_head`
runs on 128 positions at a time and each chunk goes straight into `target_logprobs` (the logits of
a micro-batch never exist at once, and no rank holds more than its vocabulary shard). Memory is the
windows' token ids (4 bytes per token) plus one micro-batch's activations, whatever the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.runtime import Runtime
from lighteval_nanotron.models.engine.scoring_plan import PlanStats
from lighteval_nanotron.models.engine.tree_attention import TreeAttention
from lighteval_nanotron.parallel.stages import OutputStageFailure, run_stage, stage_input
from lighteval_nanotron.parallel.vocab_parallel import target_logprobs
from lighteval_nanotron.requests.held_out import HeldOutLosses, HeldOutSet


@dataclass
class CausalAttention(TreeAttention):
    """`TreeAttention`'s layer code (chunked projections, the family's rotary) with plain causal
    attention over each row: no mask tensor, SDPA's causal kernel, grouped KV heads as they are."""

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index: int) -> torch.Tensor:
        dtype = q.dtype
        compute = torch.float32 if q.device.type == "cpu" else dtype
        q, k, v = (t.transpose(1, 2).to(compute) for t in (q, k, v))  # [rows, heads, seq, dim]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.shape[1] != q.shape[1])
        return out.to(dtype).transpose(1, 2).contiguous()


@dataclass
class HeldOutPlan:
    """One domain prepared for this rank: its replica's windows and micro-batches (row ranges)."""

    name: str
    windows: np.ndarray
    """This replica's windows `[k, sequence_length + 1]` (int32)."""
    first_window: int
    total_windows: int
    batches: list[tuple[int, int]] = field(default_factory=list)
    stats: PlanStats = field(default_factory=PlanStats)
    config: EngineConfig | None = None
    """The settings its batches were cut for (`tokens_per_batch` lowered by the memory budget)."""
    rebuild: Callable[[EngineConfig], Any] | None = field(default=None, repr=False, compare=False)
    """The same plan cut for other settings (the engine re-plans with smaller micro-batches)."""

    @property
    def sequence_length(self) -> int:
        return int(self.windows.shape[1]) - 1


def replica_range(total: int, dp_size: int, dp_rank: int) -> tuple[int, int]:
    """The contiguous share `[start, end)` of `total` windows of replica `dp_rank` (sizes differ by at most 1)."""
    return total * dp_rank // dp_size, total * (dp_rank + 1) // dp_size


def build_held_out_plan(
    held_out: HeldOutSet, cfg: EngineConfig, dp_size: int, dp_rank: int, min_batches: int
) -> HeldOutPlan:
    """This replica's micro-batches, and the work over all replicas (`stats`)."""
    total, length = int(held_out.windows.shape[0]), held_out.sequence_length
    start, end = replica_range(total, dp_size, dp_rank)
    mine = held_out.windows[start:end]
    rows = max(1, min(cfg.max_rows_per_batch, cfg.tokens_per_batch // length))
    if min_batches > 1 and len(mine) >= min_batches:
        rows = min(rows, -(-len(mine) // min_batches))
    batches = [(a, min(a + rows, len(mine))) for a in range(0, len(mine), rows)]
    stats = PlanStats(
        docs=total,
        useful_tokens=total * length,
        processed_tokens=total * length,
        logit_positions=total * length,
        attention_pairs=total * length * (length + 1) // 2,
        rows=total,
        batches=sum(-(-(b - a) // rows) for a, b in (replica_range(total, dp_size, r) for r in range(dp_size))),
    )
    return HeldOutPlan(held_out.name, np.ascontiguousarray(mine), start, total, batches, stats)


def _consumer(rt: Runtime, targets: torch.Tensor, window_of: torch.Tensor, sums: torch.Tensor):
    """`consume` for `run_stage`: add each chunk's negative target log-probs to its windows' sums."""

    def consume(logits: torch.Tensor, start: int) -> None:
        end = start + logits.shape[0]
        logprobs, _ = target_logprobs(logits[:, 0], targets[start:end].to(logits.device), rt.mesh.tp_group)
        sums.index_add_(0, window_of[start:end], -logprobs.double().cpu())

    return consume


def _local_sums(rt: Runtime, plan: HeldOutPlan) -> torch.Tensor | None:
    """This replica's per-window sums (on every rank of its output stage), None off the chain."""
    if rt.stage is None:
        return None
    sums = torch.zeros(len(plan.windows), dtype=torch.float64)
    length = plan.sequence_length
    link = rt.new_link()
    failure = OutputStageFailure(rt.stage, link)
    chunk = rt.config.chunk_tokens_for(rt.device)
    for done, (first, last) in enumerate(plan.batches, start=1):
        if failure.error is not None:
            failure.drain()
            rt.sync_pipeline()
            continue
        rows = last - first
        block = torch.from_numpy(plan.windows[first:last]).long()
        mask = torch.ones((rows, length), dtype=torch.bool, device=rt.device)
        positions = torch.arange(length, device=rt.device).expand(rows, length)
        attention = CausalAttention(positions, None, chunk_tokens=chunk)
        select = (torch.arange(length).repeat(rows), torch.arange(rows).repeat_interleave(length))
        window_of = torch.arange(first, last).repeat_interleave(length)
        consume = _consumer(rt, block[:, 1:].reshape(-1), window_of, sums) if rt.stage.is_last else None
        x = stage_input(rt.stage, link, block[:, :-1].to(rt.device), select)
        with failure.guarding():
            run_stage(rt.stage, link, x, mask, attention, select, consume)
        rt.sync_pipeline()
        rt.micro_batch_done(done, len(plan.batches))
    link.flush()
    failure.raise_if_failed()
    return sums


def run_held_out(rt: Runtime, plan: HeldOutPlan) -> list[HeldOutLosses]:
    """`[HeldOutLosses]` of every window, in order, on the ranks that receive results; `[]` elsewhere."""
    sums = rt.agreed(lambda: _local_sums(rt, plan), "held-out loss")
    payload = (plan.first_window, sums.numpy().tobytes()) if sums is not None and rt.mesh.holds_results else None
    gathered = rt.mesh.gather(payload, to_all=rt.config.gather_to == "all")
    if gathered is None:
        return []
    nll = np.zeros(plan.total_windows, dtype=np.float64)
    for part in gathered:
        if part is not None:
            first, raw = part
            values = np.frombuffer(raw, dtype=np.float64)
            nll[first : first + len(values)] = values
    return [HeldOutLosses(nll, plan.sequence_length)]
