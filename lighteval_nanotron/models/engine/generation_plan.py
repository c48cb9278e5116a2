"""Generation requests: tokenized, left-truncated contexts with their own stop rules and decoding
settings, one row per sample, assigned to replicas and cut into micro-batches. Pure and
identical on every rank."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.engine.batching import batch_budget, cut_batches, replica_items
from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.data import GenerativeTaskDatasetNanotron
from lighteval_nanotron.models.engine.sampling import doc_seed
from lighteval_nanotron.models.engine.scoring_plan import PlanStats
from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter
from lighteval_nanotron.requests import Doc, GenerationParameters


@dataclass(frozen=True)
class GenRequest:
    """One sample of one doc to continue. `generation_size` is the effective `max_new_tokens`;
    `sampling` None decodes greedily, else its (merged) settings draw sample `sample_index`
    from the generator stream `seed_stream`."""

    index: int
    context: str
    input_ids: tuple[int, ...]
    generation_size: int
    stop_sequences: tuple[str, ...]
    truncated_tokens_count: int
    num_samples: int = 1
    capped_new_tokens: int = 0
    """New tokens asked for (`generation_size`) beyond what the window leaves after one context token."""
    use_logits: bool = False
    sampling: GenerationParameters | None = None
    sample_index: int = 0
    seed_stream: int = 0
    doc_stream: tuple[str, str] = ("", "")  # (task name, doc id): the doc's identity in the seed

    @property
    def token_length(self) -> int:
        return len(self.input_ids)


@dataclass
class GenerationPlan:
    """Prepared once; `NanotronLightevalModel.run(plan)` generates at any checkpoint."""

    requests: list[GenRequest]  # one per doc (its sample 0); the batches hold one row per sample
    batches: list[list[GenRequest]] = field(default_factory=list)  # this replica's
    padded_tokens_count: dict[int, int] = field(default_factory=dict)
    kind: str = "generation"
    stats: PlanStats = field(default_factory=PlanStats)
    """Work of the last run over all replicas (filled by `run`: it depends on when rows stop)."""
    doc_processed_tokens: list[float] = field(default_factory=list)
    """Per request (in order), token positions fed in the last run; they add up to `stats.processed_tokens`."""
    doc_useful_tokens: list[int] = field(default_factory=list)
    config: EngineConfig | None = None
    """The settings its batches were cut for (`tokens_per_batch` lowered by the memory budget)."""
    rebuild: Callable[[EngineConfig], Any] | None = field(default=None, repr=False, compare=False)
    """The same plan cut for other settings (the engine re-plans with smaller micro-batches)."""


def make_request(
    index: int, doc: Doc, context: str, tok: TokenizerAdapter, cfg: EngineConfig, max_length: int
) -> GenRequest:
    """Keep the newest `max_length - max_new_tokens` context tokens (at least one). The doc's own
    generation parameters override the engine's field by field; several samples need sampling."""
    params = (doc.generation_parameters or GenerationParameters()).over(cfg.generation)
    num_samples = max(doc.num_samples, params.num_samples or 1)
    if num_samples > 1 and not params.samples:
        raise ConfigError(
            f"task {doc.task_name or '?'} asks for {num_samples} samples per doc (its metrics or num_samples) but "
            "decoding is greedy (temperature 0), which would give identical samples: set a generation "
            "temperature > 0 (engine/eval/hook `generation.temperature`, or the task's generation_parameters)."
        )
    ignored = [f"{name}={value}" for name, value, off in (("top_k", params.top_k, 0), ("top_p", params.top_p, 1))
               if value is not None and value != off]  # fmt: skip
    if ignored and not params.samples:
        raise ConfigError(
            f"task {doc.task_name or '?'}: {', '.join(ignored)} would have no effect: decoding is greedy "
            "(temperature 0) and takes the most likely token, yet the results would record them. Set a generation "
            "temperature > 0 to sample with them, or leave them out."
        )
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
        num_samples=num_samples,
        capped_new_tokens=requested - max_new if requested > max_new else 0,
        use_logits=doc.use_logits,
        sampling=replace(params, seed=params.seed or 0) if params.samples else None,
        doc_stream=(doc.task_name, doc.id),
    )


def sample_rows(request: GenRequest) -> list[GenRequest]:
    """One row per sample of a doc (greedy: the request itself), each with its own seed stream."""
    if request.sampling is None:
        return [request]
    return [
        replace(
            request,
            sample_index=j,
            seed_stream=doc_seed(request.sampling.seed, *request.doc_stream, request.context, j),
        )
        for j in range(request.num_samples)
    ]


def generation_requests(
    docs: Sequence[Doc], prompt_fn: Callable[[Doc], str], tok: TokenizerAdapter, cfg: EngineConfig, max_length: int
) -> list[GenRequest]:
    """Every doc's prompt rendered and tokenized, in one batch call (the same on every rank:
    computed once, shared)."""
    contexts = [prompt_fn(doc) for doc in docs]
    with tok.batched((context, cfg.add_special_tokens) for context in contexts):
        return [make_request(i, doc, text, tok, cfg, max_length) for i, (doc, text) in enumerate(zip(docs, contexts))]


def build_generation_plan(
    requests: list[GenRequest], cfg: EngineConfig, dp_size: int, dp_rank: int, min_batches: int = 1, pools: int = 1
) -> GenerationPlan:
    """Rows (one per sample) split over replicas. With the KV cache, each replica's rows are dealt
    round-robin, longest first, into `pools` decoding pools (one per pipeline stage, so stages
    take turns), which start rows as slots free up. Without it, they are cut into micro-batches
    (at least `min_batches` per replica when there are enough rows)."""
    plan = GenerationPlan(requests)
    rows = [row for request in requests for row in sample_rows(request)]
    dataset = GenerativeTaskDatasetNanotron(rows, num_dataset_splits=None)
    longest = max((r.token_length + r.generation_size for r in rows), default=1)
    for replica in range(dp_size):  # every replica's batches: padding counts cover all docs
        ordered = replica_items(dataset, dp_size, replica, cfg.sort_by_length)
        if cfg.kv_cache:
            if replica == dp_rank:
                plan.batches += [p for p in (ordered[k::pools] for k in range(pools)) if p]
            continue
        fixed = None if cfg.pad_per_batch else longest
        cost = lambda r: r.token_length + r.generation_size  # noqa: E731
        budget = batch_budget([fixed or cost(r) for r in ordered], cfg.tokens_per_batch, min_batches)
        for batch in cut_batches(ordered, cost, budget, cfg.max_rows_per_batch, fixed):
            width = max(r.token_length for r in batch)
            plan.padded_tokens_count.update({r.index: width - r.token_length for r in batch})
            if replica == dp_rank:
                plan.batches.append(batch)
    return plan
