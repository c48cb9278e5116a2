"""Greedy-generation requests: tokenized, left-truncated contexts with their own stop rules,
assigned to replicas and cut into micro-batches. Pure and identical on every rank."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from lighteval_nanotron.data import GenerativeTaskDatasetNanotron
from lighteval_nanotron.models.nanotron.batching import batch_budget, cut_batches, replica_items
from lighteval_nanotron.models.nanotron.config import EngineConfig
from lighteval_nanotron.models.nanotron.scoring_plan import PlanStats
from lighteval_nanotron.models.nanotron.tokenization import TokenizerAdapter
from lighteval_nanotron.tasks.requests import Doc


@dataclass(frozen=True)
class GenRequest:
    """One doc to continue greedily. `generation_size` is the effective `max_new_tokens`."""

    index: int
    context: str
    input_ids: tuple[int, ...]
    generation_size: int
    stop_sequences: tuple[str, ...]
    truncated_tokens_count: int
    num_samples: int = 1
    use_logits: bool = False

    @property
    def token_length(self) -> int:
        return len(self.input_ids)


@dataclass
class GenerationPlan:
    """Prepared once; `NanotronLightevalModel.run(plan)` generates at any checkpoint."""

    requests: list[GenRequest]
    batches: list[list[GenRequest]] = field(default_factory=list)  # this replica's
    padded_tokens_count: dict[int, int] = field(default_factory=dict)
    kind: str = "generation"
    stats: PlanStats = field(default_factory=PlanStats)
    """Work of the last run over all replicas (filled by `run`: it depends on when rows stop)."""
    doc_processed_tokens: list[float] = field(default_factory=list)
    """Per request (in order), token positions fed in the last run; they add up to `stats.processed_tokens`."""
    doc_useful_tokens: list[int] = field(default_factory=list)


def make_request(
    index: int, doc: Doc, context: str, tok: TokenizerAdapter, cfg: EngineConfig, max_length: int
) -> GenRequest:
    """Keep the newest `max_length - max_new_tokens` context tokens (at least one)."""
    requested = cfg.default_max_new_tokens if doc.generation_size is None else doc.generation_size
    max_new = max(1, min(requested, max_length - 1))
    ids = tok.encode(context, add_special_tokens=cfg.add_special_tokens) or [tok.prefix_token_id]
    budget = max_length - max_new
    cut = max(0, len(ids) - budget)
    return GenRequest(
        index=index,
        context=context,
        input_ids=tuple(ids[cut:]),
        generation_size=max_new,
        stop_sequences=tuple(doc.stop_sequences or ()),
        truncated_tokens_count=cut,
        num_samples=doc.num_samples,
        use_logits=doc.use_logits,
    )


def generation_requests(
    docs: Sequence[Doc], prompt_fn: Callable[[Doc], str], tok: TokenizerAdapter, cfg: EngineConfig, max_length: int
) -> list[GenRequest]:
    """Every doc's prompt rendered and tokenized, in one batch call (the same on every rank:
    computed once, shared)."""
    contexts = [prompt_fn(doc) for doc in docs]
    with tok.batched((context, cfg.add_special_tokens) for context in contexts):
        return [make_request(i, doc, text, tok, cfg, max_length) for i, (doc, text) in enumerate(zip(docs, contexts))]


def build_generation_plan(
    requests: list[GenRequest], cfg: EngineConfig, dp_size: int, dp_rank: int, min_batches: int = 1
) -> GenerationPlan:
    """Requests split over replicas, cut into micro-batches (at least `min_batches` per replica
    when there are enough requests, so pipeline stages can take turns)."""
    plan = GenerationPlan(requests)
    dataset = GenerativeTaskDatasetNanotron(requests, num_dataset_splits=None)
    longest = max((r.token_length + r.generation_size for r in requests), default=1)
    for replica in range(dp_size):  # every replica's batches: padding counts cover all docs
        ordered = replica_items(dataset, dp_size, replica, cfg.sort_by_length)
        fixed = None if cfg.pad_per_batch else longest
        cost = lambda r: r.token_length + r.generation_size  # noqa: E731
        budget = batch_budget([fixed or cost(r) for r in ordered], cfg.max_tokens_per_batch, min_batches)
        for batch in cut_batches(ordered, cost, budget, cfg.max_rows_per_batch, fixed):
            width = max(r.token_length for r in batch)
            plan.padded_tokens_count.update({r.index: width - r.token_length for r in batch})
            if replica == dp_rank:
                plan.batches.append(batch)
    return plan
