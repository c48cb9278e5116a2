"""Running a scoring plan: micro-batches through the pipeline, vocabulary-parallel log-probs on
the output stage, per-slot sums gathered once over the world group. Each replica sends only the
slots its own micro-batches scored (`SlotScores`), not a dense list of every slot."""

from __future__ import annotations

import numpy as np
import torch

from lighteval_nanotron.models.engine.runtime import Runtime
from lighteval_nanotron.models.engine.scoring_plan import PrefixForward, ResponseSpec, ScoringBatch, ScoringPlan
from lighteval_nanotron.models.engine.tree_attention import PrefixKeys, TreeAttention, ancestor_mask
from lighteval_nanotron.parallel.stages import OutputStageFailure, StageLink, check_leading, run_stage, stage_input
from lighteval_nanotron.parallel.vocab_parallel import target_logprobs
from lighteval_nanotron.requests import ModelResponse


def _score_batch(
    rt: Runtime, batch: ScoringBatch, logits: torch.Tensor, sums: torch.Tensor, misses: torch.Tensor
) -> None:
    """Add this batch's target log-probs to `sums` and non-greedy counts to `misses` (by slot),
    from the logits `[seq, rows, vocab / tp]` of every position (`logits_at_targets` off)."""
    if batch.targets.numel() == 0:
        return
    check_leading(logits.shape, tuple(batch.input_ids.shape[::-1]), "The output stage's logits")
    device = logits.device
    picked = logits[batch.positions.to(device), batch.rows.to(device)]  # [n, vocab / tp]
    logprobs, greedy = target_logprobs(picked, batch.targets.to(device), rt.mesh.tp_group)
    sums.index_add_(0, batch.slots, logprobs.double().cpu())
    misses.index_add_(0, batch.slots, (~greedy).long().cpu())


def _chunk_scorer(rt: Runtime, batch: ScoringBatch, sums: torch.Tensor, misses: torch.Tensor):
    """`consume` for `run_stage`: the log-probs of the targets read from one chunk of the
    selected positions' logits `[c, 1, vocab / tp]` (the chunk's first position given)."""
    read = batch.target_read
    order = torch.argsort(read, stable=True)
    sorted_read = read[order]

    def consume(logits: torch.Tensor, start: int) -> None:
        lo, hi = torch.searchsorted(sorted_read, torch.tensor([start, start + logits.shape[0]])).tolist()
        targets = order[lo:hi]
        local = read[targets] - start  # each position of the chunk is read by one target or more
        logprobs, greedy = target_logprobs(
            logits[:, 0], batch.targets[targets].to(logits.device), rt.mesh.tp_group, rows=local
        )
        sums.index_add_(0, batch.slots[targets], logprobs.double().cpu())
        misses.index_add_(0, batch.slots[targets], (~greedy).long().cpu())

    return consume


SlotScores = tuple  # (slots: bytes | None, sums: bytes, missed: bytes)
"""One replica's partial results, as raw bytes in a plain tuple (the smallest pickle): the slots
it scored (int32; None when it scored every slot), their summed log-probs (float64) and whether
any token was not greedy (uint8). A doc's rolling windows may be scored by several replicas:
partial results add up."""


def slot_scores(plan: ScoringPlan, sums: torch.Tensor, misses: torch.Tensor) -> SlotScores:
    touched = [batch.slots for batch in plan.batches if batch.slots.numel()]
    slots = torch.unique(torch.cat(touched)) if touched else torch.zeros(0, dtype=torch.long)
    every = slots.numel() == plan.num_slots
    return (
        None if every else slots.numpy().astype(np.int32).tobytes(),
        sums[slots].numpy().tobytes(),
        (misses[slots] > 0).numpy().astype(np.uint8).tobytes(),
    )


def _add_slot_scores(payload: SlotScores, sums: np.ndarray, missed: np.ndarray) -> None:
    slot_bytes, sum_bytes, missed_bytes = payload
    slots = np.arange(len(sums)) if slot_bytes is None else np.frombuffer(slot_bytes, dtype=np.int32)
    np.add.at(sums, slots, np.frombuffer(sum_bytes, dtype=np.float64))
    np.logical_or.at(missed, slots, np.frombuffer(missed_bytes, dtype=np.uint8).astype(bool))


def _run_prefixes(
    rt: Runtime, link: StageLink, prefixes: PrefixForward, failure: OutputStageFailure, total: int
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """This stage's keys/values of every node of the prefix micro-batches (per layer, flattened
    and concatenated in batch order); no logits are computed. They are the first of the plan's
    `total` micro-batches (progress)."""
    captured: list[dict[int, tuple[torch.Tensor, torch.Tensor]]] = []
    nothing = torch.zeros(0, dtype=torch.long)
    for done, batch in enumerate(prefixes.batches, start=1):
        if failure.error is not None:
            failure.drain()
            rt.sync_pipeline()
            continue
        mask = torch.ones(batch.input_ids.shape, dtype=torch.bool, device=rt.device)
        capture: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        parents = batch.parents.to(rt.device)
        tree = TreeAttention(
            batch.depths.to(rt.device),
            ancestor_mask(parents),
            capture=capture,
            chunk_tokens=rt.config.chunk_tokens_for(rt.device),
        )
        x = stage_input(rt.stage, link, batch.input_ids.to(rt.device), (nothing, nothing))
        with failure.guarding():
            run_stage(rt.stage, link, x, mask, tree, (nothing, nothing))
            captured.append(capture)
        rt.sync_pipeline()
        rt.micro_batch_done(done, total)
    if failure.error is not None:
        return {}  # the batches are drained, nothing reads it
    if len(captured) == 1:
        return captured[0]
    return {layer: tuple(torch.cat([c[layer][i] for c in captured]) for i in range(2)) for layer in captured[0]}


def _prefix_keys(
    store: dict[int, tuple[torch.Tensor, torch.Tensor]], prefixes: PrefixForward, batch: ScoringBatch, device
) -> PrefixKeys:
    """The prefixes `batch` reads, in key order, and which of its nodes see which of their positions."""
    nodes = [prefixes.nodes[c] for c in batch.context_ids]
    columns = torch.cat([torch.full((len(n),), c, dtype=torch.long) for c, n in zip(batch.context_ids, nodes)])
    allowed = batch.contexts.to(device)[:, :, None] == columns.to(device)[None, None, :]
    return PrefixKeys(store, torch.cat(nodes).to(device), allowed)


def _local_scores(rt: Runtime, plan: ScoringPlan) -> SlotScores | None:
    """Run this replica's micro-batches; its slots' results on TP 0 of the output stage."""
    sums = torch.zeros(plan.num_slots, dtype=torch.float64)
    misses = torch.zeros(plan.num_slots, dtype=torch.long)
    if rt.stage is None:
        return None
    link = rt.new_link()
    failure = OutputStageFailure(rt.stage, link)
    select_ok = rt.config.logits_at_targets
    first = len(plan.prefixes.batches)
    total = first + len(plan.batches)
    store = _run_prefixes(rt, link, plan.prefixes, failure, total) if plan.prefixes.batches else {}
    for done, batch in enumerate(plan.batches, start=first + 1):
        if failure.error is not None:
            failure.drain()
            rt.sync_pipeline()
            continue
        mask = torch.ones(batch.input_ids.shape, dtype=torch.bool, device=rt.device)
        tree = None
        if batch.parents is not None:
            parents = batch.parents.to(rt.device)
            prefix = _prefix_keys(store, plan.prefixes, batch, rt.device) if batch.context_ids else None
            tree = TreeAttention(
                batch.depths.to(rt.device),
                ancestor_mask(parents),
                prefix=prefix,
                chunk_tokens=rt.config.chunk_tokens_for(rt.device),
            )
        select = (batch.read_positions, batch.read_rows) if select_ok and batch.read_rows.numel() else None
        consume = _chunk_scorer(rt, batch, sums, misses) if select is not None else None
        x = stage_input(rt.stage, link, batch.input_ids.to(rt.device), select)
        with failure.guarding():
            logits = run_stage(rt.stage, link, x, mask, tree, select, consume)
            if logits is not None:
                _score_batch(rt, batch, logits, sums, misses)
        rt.sync_pipeline()
        rt.micro_batch_done(done, total)
    link.flush()
    failure.raise_if_failed()
    return slot_scores(plan, sums, misses) if rt.mesh.holds_results else None


def _merge(payloads: list[SlotScores | None], num_slots: int) -> tuple[list[float], list[bool]]:
    """Add the replicas' partial results into every slot (in rank order, as float64)."""
    sums = np.zeros(num_slots, dtype=np.float64)
    missed = np.zeros(num_slots, dtype=bool)
    for payload in payloads:
        if payload is not None:
            _add_slot_scores(payload, sums, missed)
    return sums.tolist(), (~missed).tolist()


def _response(spec: ResponseSpec, sums: list[float], greedy: list[bool]) -> ModelResponse:
    return ModelResponse(
        input=spec.input,
        input_tokens=list(spec.input_tokens),
        output_tokens=[list(t) for t in spec.output_tokens],
        logprobs=[sums[s] for s in spec.slots],
        argmax_logits_eq_gold=[greedy[s] for s in spec.slots],
        unconditioned_logprobs=None
        if spec.unconditioned_slots is None
        else [sums[s] for s in spec.unconditioned_slots],
        truncated_tokens_count=spec.truncated_tokens_count,
        padded_tokens_count=spec.padded_tokens_count,
    )


def run_scoring(rt: Runtime, plan: ScoringPlan) -> list[ModelResponse]:
    """Responses in the order of the plan's docs (on every rank, or on the reporting rank only)."""
    payload = rt.agreed(lambda: _local_scores(rt, plan), "scoring")
    gathered = rt.mesh.gather(payload, to_all=rt.config.gather_to == "all")
    if gathered is None:
        return []
    sums, greedy = _merge(gathered, plan.num_slots)
    return [_response(spec, sums, greedy) for spec in plan.specs]
