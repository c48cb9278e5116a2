"""Log-likelihood and rolling log-likelihood requests turned into scoring rows and micro-batches.

A scoring row is one model input plus the positions whose logits are read and the token each of
them predicts; every target adds its log-probability to a result slot. A multiple-choice doc gets
one slot per choice (and one per choice for the unconditioned query); a rolling doc one slot for
all its windows. Everything here is pure and deterministic: every rank builds the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from lighteval_nanotron.models.engine.batching import (
    batch_budget,
    cut_batches,
    replica_items,
    round_up,
)
from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.data import LoglikelihoodDataset
from lighteval_nanotron.models.engine.doc_tokens import prefix_doc_tokens, row_doc_tokens, slot_docs
from lighteval_nanotron.models.engine.packing import ModelRow, ScoredSequence, chain_row, packed_rows, tree_rows
from lighteval_nanotron.models.engine.shared_prefix import split_shared_prefixes
from lighteval_nanotron.models.engine.tokenization import (
    TokenizerAdapter,
    Window,
    encode_pair,
    pair_texts,
    rolling_windows,
    score_window,
)
from lighteval_nanotron.requests import Doc

PromptFn = Callable[[Doc], str]


@dataclass
class ScoringBatch:
    """One micro-batch: right-padded input ids, the prefix-tree structure (None: plain chains),
    and flat index tensors of what to score."""

    input_ids: torch.Tensor  # [rows, seq] int64
    rows: torch.Tensor  # [n] row of each target
    positions: torch.Tensor  # [n] position whose logits predict the target
    targets: torch.Tensor  # [n] target token ids
    slots: torch.Tensor  # [n] result slot of each target
    parents: torch.Tensor | None = None  # [rows, seq] parent node (roots and pads: themselves)
    depths: torch.Tensor | None = None  # [rows, seq] position ids
    read_rows: torch.Tensor | None = None  # [m] distinct (row, position) pairs whose logits are read
    read_positions: torch.Tensor | None = None
    target_read: torch.Tensor | None = None  # [n] index of each target's pair in the read list
    contexts: torch.Tensor | None = None  # [rows, seq] shared prefix each node sees (-1: none)
    context_ids: tuple[int, ...] = ()  # the shared prefixes this batch reads, in key order


@dataclass
class PrefixForward:
    """This replica's shared prefixes, computed once per evaluation: micro-batches of prefix
    chains (no targets), and where each prefix's keys/values sit in the captured nodes (the
    batches' `[rows, seq]` nodes flattened and concatenated)."""

    batches: list[ScoringBatch] = field(default_factory=list)
    nodes: dict[int, torch.Tensor] = field(default_factory=dict)


@dataclass
class PlanStats:
    """Work of a plan over all replicas, known before it runs (generation: filled by the run)."""

    docs: int = 0
    useful_tokens: int = 0
    """Per doc: its context tokens once plus its continuation tokens (what any exact method feeds)."""
    processed_tokens: int = 0
    """Token positions fed to the model, padding and recomputed contexts included."""
    padding_tokens: int = 0
    logit_positions: int = 0
    """Positions whose logits are computed by `lm_head`."""
    attention_pairs: int = 0
    """(query, key) pairs of the attention the rows need."""
    rows: int = 0
    batches: int = 0
    recomputed_steps: int = 0
    """Generation steps after the first that fed whole sequences again (no KV cache)."""
    shared_prefixes: int = 0
    """Prefixes shared by several docs, computed once per evaluation (per replica reading them)."""
    shared_prefix_tokens: int = 0
    """Positions of those prefixes processed (once per evaluation and replica, in `processed_tokens`)."""
    shared_prefix_reads: int = 0
    """Positions of those prefixes read from their keys/values instead of being recomputed."""
    decode_steps: int = 0
    """Generation steps that fed one new token per running row against the KV cache (per stage)."""
    decode_cache_positions: int = 0
    """Cached positions those steps' attention read: every running row's length, summed over the steps."""
    decode_seconds: float = 0.0
    """Wall seconds of those steps on the stage that ran them (measured by the run)."""

    def add(self, other: "PlanStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class ResponseSpec:
    """What is known about one doc's response before the model runs."""

    input: str
    input_tokens: list[int]
    output_tokens: list[list[int]]
    slots: list[int]
    unconditioned_slots: list[int] | None = None
    truncated_tokens_count: int = 0
    unscored_continuation_tokens: int = 0
    """Of the longest choice, tokens left unscored because the choice alone is longer than the window."""
    padded_tokens_count: int = 0
    useful_tokens: int = 0
    processed_tokens: float = 0.0
    """This doc's share of the plan's token positions, over all replicas (`doc_tokens`)."""


@dataclass
class ScoringPlan:
    """Prepared once; `NanotronLightevalModel.run(plan)` evaluates it at any checkpoint."""

    kind: str
    specs: list[ResponseSpec]
    num_slots: int
    batches: list[ScoringBatch] = field(default_factory=list)
    stats: PlanStats = field(default_factory=PlanStats)
    prefixes: PrefixForward = field(default_factory=PrefixForward)
    config: EngineConfig | None = None
    """The settings its batches were cut for (`tokens_per_batch` lowered by the memory budget)."""
    rebuild: Callable[[EngineConfig], Any] | None = field(default=None, repr=False, compare=False)
    """The same plan cut for other settings (the engine re-plans with smaller micro-batches)."""


def _row(window: Window, slots: Sequence[int], doc_index: int) -> ScoredSequence:
    positions = tuple(window.start + k for k in range(len(window.targets)))
    return ScoredSequence(window.input_ids, positions, window.targets, tuple(slots), doc_index)


def useful_tokens(sequences: Sequence[ScoredSequence]) -> int:
    """A doc's context once (the longest unscored prefix) plus each sequence's scored part."""
    if not sequences:
        return 0
    context = max(s.positions[0] + 1 if s.positions else s.token_length for s in sequences)
    return context + sum(s.token_length - (s.positions[0] + 1 if s.positions else s.token_length) for s in sequences)


def start_space(choice: str, forced: bool | None) -> str:
    """`choice` with its leading space forced on (True), off (False) or as written (None)."""
    if forced is True and not choice.startswith(" "):
        return " " + choice
    if forced is False:
        return choice.lstrip()
    return choice


def _choice_rows(
    tok: TokenizerAdapter,
    context: str,
    choices: list[str],
    first_slot: int,
    doc_index: int,
    cfg: EngineConfig,
    max_length: int,
) -> tuple[list[ScoredSequence], list[int], list[list[int]], int, int]:
    """One sequence scoring each choice after `context` (sharing happens when rows are built);
    returns them, the context tokens, the continuation tokens, the tokens cut from the left, and
    the continuation tokens left unscored (a choice longer than the window)."""
    choices = [start_space(c, cfg.multichoice_continuations_start_space) for c in choices]
    pairs = [encode_pair(tok, context, c, cfg.add_special_tokens, cfg.pairwise_tokenization) for c in choices]
    rows, cut, unscored = [], 0, 0
    for (ctx, cont), slot in zip(pairs, range(first_slot, first_slot + len(choices))):
        window, cut_here = score_window(ctx, cont, max_length)
        rows.append(_row(window, [slot] * len(window.targets), doc_index))
        cut = max(cut, cut_here)
        unscored = max(unscored, len(cont) - len(window.targets))
    return rows, (pairs[0][0] if pairs else []), [cont for _, cont in pairs], cut, unscored


def loglikelihood_rows(
    docs: Sequence[Doc],
    tok: TokenizerAdapter,
    prompt_fn: PromptFn,
    cfg: EngineConfig,
    max_length: int,
    unconditioned: bool,
) -> tuple[list[ScoredSequence], list[ResponseSpec], int, int]:
    """Sequences, response specs, number of result slots, useful tokens (all prompts tokenized
    in batch calls first: `TokenizerAdapter.batched`)."""
    contexts = [prompt_fn(doc) for doc in docs]
    wanted = [
        text
        for doc, context in zip(docs, contexts)
        for query in ([context, doc.unconditioned_query] if unconditioned else [context])
        if query is not None
        for choice in doc.choices or []
        for text in pair_texts(query, choice, cfg.add_special_tokens, cfg.pairwise_tokenization)
    ]
    with tok.batched(wanted):
        return _loglikelihood_rows(docs, contexts, tok, cfg, max_length, unconditioned)


def _loglikelihood_rows(
    docs: Sequence[Doc],
    contexts: list[str],
    tok: TokenizerAdapter,
    cfg: EngineConfig,
    max_length: int,
    unconditioned: bool,
) -> tuple[list[ScoredSequence], list[ResponseSpec], int, int]:
    rows: list[ScoredSequence] = []
    useful = 0
    specs: list[ResponseSpec] = []
    next_slot = 0
    for index, (doc, context) in enumerate(zip(docs, contexts)):
        choices = list(doc.choices or [])
        doc_rows, ctx_ids, continuations, cut, unscored = _choice_rows(
            tok, context, choices, next_slot, index, cfg, max_length
        )
        spec = ResponseSpec(
            context, ctx_ids, continuations, list(range(next_slot, next_slot + len(choices))), None, cut, unscored
        )
        next_slot += len(choices)
        spec.useful_tokens = useful_tokens(doc_rows)
        if unconditioned and doc.unconditioned_query is not None:
            extra, _, _, _, _ = _choice_rows(tok, doc.unconditioned_query, choices, next_slot, index, cfg, max_length)
            spec.useful_tokens += useful_tokens(extra)
            doc_rows += extra
            spec.unconditioned_slots = list(range(next_slot, next_slot + len(choices)))
            next_slot += len(choices)
        useful += spec.useful_tokens
        rows += doc_rows
        specs.append(spec)
    return rows, specs, next_slot, useful


def rolling_rows(
    docs: Sequence[Doc], tok: TokenizerAdapter, prompt_fn: PromptFn, cfg: EngineConfig, max_length: int
) -> tuple[list[ScoredSequence], list[ResponseSpec], int, int]:
    """Sequences (windows), response specs, number of result slots, useful tokens (each doc's
    text plus its prefix token, once)."""
    rows: list[ScoredSequence] = []
    specs: list[ResponseSpec] = []
    stride = cfg.stride_for(max_length)
    texts = [prompt_fn(doc) for doc in docs]
    with tok.batched((text, False) for text in texts):
        encoded = [tok.encode(text, add_special_tokens=False) for text in texts]
    for index, (text, tokens) in enumerate(zip(texts, encoded)):
        for window in rolling_windows(tokens, tok.prefix_token_id, max_length, stride):
            rows.append(_row(window, [index] * len(window.targets), index))
        specs.append(ResponseSpec(text, tokens, [tokens], [index], useful_tokens=len(tokens)))
    return rows, specs, len(docs), sum(len(spec.input_tokens) for spec in specs)


def _to_batch(rows: Sequence[ModelRow], width: int, pad_id: int) -> ScoringBatch:
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    trees = rows[0].parents is not None
    parents = torch.arange(width).repeat(len(rows), 1) if trees else None
    depths = torch.zeros((len(rows), width), dtype=torch.long) if trees else None
    with_contexts = any(row.contexts is not None for row in rows)
    contexts = torch.full((len(rows), width), -1, dtype=torch.long) if with_contexts else None
    flat: list[tuple[int, int, int, int]] = []
    for r, row in enumerate(rows):
        input_ids[r, : row.token_length] = torch.tensor(row.input_ids, dtype=torch.long)
        if trees:
            parents[r, : row.token_length] = torch.tensor(row.parents, dtype=torch.long)
            depths[r, : row.token_length] = torch.tensor(row.depths, dtype=torch.long)
        if row.contexts is not None:
            contexts[r, : row.token_length] = torch.tensor(row.contexts, dtype=torch.long)
        flat += [(r, p, t, s) for p, t, s in zip(row.positions, row.targets, row.slots)]
    columns = torch.tensor(flat, dtype=torch.long).reshape(-1, 4).T
    pairs = sorted({(r, p) for r, p, _, _ in flat})
    index = {pair: i for i, pair in enumerate(pairs)}
    read = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T
    target_read = torch.tensor([index[(r, p)] for r, p, _, _ in flat], dtype=torch.long)
    context_ids = tuple(sorted(set(contexts.unique().tolist()) - {-1})) if with_contexts else ()
    return ScoringBatch(
        input_ids,
        columns[0],
        columns[1],
        columns[2],
        columns[3],
        parents,
        depths,
        read[0],
        read[1],
        target_read,
        contexts,
        context_ids,
    )


def model_rows(
    sequences: list[ScoredSequence], cfg: EngineConfig, dp_size: int
) -> tuple[list[ModelRow], list[int] | None, list[tuple[int, ...]]]:
    """Rows as the switches ask, the replica of each when the packing decides it, and the shared
    prefixes the rows read: one chain per sequence (both off), one prefix tree per doc
    (`shared_context`), or sequences packed into trees of `pack_width` tokens, one contiguous
    token-ordered part per replica (`pack_rows`; with `shared_context` identical prefixes, e.g.
    few-shot examples, are shared across docs). With `shared_context` and `shared_prefix`, a
    prefix of at least `shared_prefix_min_tokens` shared by several docs (packed: by more than
    one row holds) is taken out of their sequences (computed once per evaluation, see
    `shared_prefix`)."""
    prefixes: list[tuple[int, ...]] = []
    if cfg.shared_context and cfg.shared_prefix:
        width = cfg.pack_width if cfg.pack_rows else None
        sequences, prefixes = split_shared_prefixes(sequences, cfg.shared_prefix_min_tokens, width)
    rows, owner = _rows(sequences, cfg, dp_size)
    return rows, owner, prefixes


def _rows(sequences: list[ScoredSequence], cfg: EngineConfig, dp_size: int) -> tuple[list[ModelRow], list[int] | None]:
    if cfg.pack_rows:
        groups = packed_rows(sequences, cfg.pack_width, share=cfg.shared_context, parts=dp_size)
        return [row for group in groups for row in group], [
            replica for replica, group in enumerate(groups) for _ in group
        ]
    return _unpacked_rows(sequences, cfg), None


def _unpacked_rows(sequences: list[ScoredSequence], cfg: EngineConfig) -> list[ModelRow]:
    if cfg.shared_context:
        by_doc: dict[int, list[ScoredSequence]] = {}
        for sequence in sequences:
            by_doc.setdefault(sequence.doc_index, []).append(sequence)
        return tree_rows(by_doc.values(), share=True)
    return [chain_row(sequence) for sequence in sequences]


def build_batches(
    sequences: list[ScoredSequence],
    specs: list[ResponseSpec],
    cfg: EngineConfig,
    dp_size: int,
    dp_rank: int,
    pad_multiple: int,
    pad_id: int,
    min_batches: int = 1,
) -> tuple[list[ScoringBatch], PlanStats, PrefixForward]:
    """This replica's micro-batches (at least `min_batches` when there is enough work), and the
    plan's work over all replicas; also fills every spec's padded-token count (all replicas)."""
    for spec in specs:
        spec.padded_tokens_count, spec.processed_tokens = 0, 0.0
    rows, owner, prefixes = model_rows(sequences, cfg, dp_size)
    dataset = LoglikelihoodDataset(rows, num_dataset_splits=None)
    longest = round_up(max((row.token_length for row in rows), default=1), pad_multiple)
    mine: list[ScoringBatch] = []
    stats = PlanStats(docs=len(specs))
    slot_doc = slot_docs([spec.slots + (spec.unconditioned_slots or []) for spec in specs])
    mine_prefixes = PrefixForward()
    for replica in range(dp_size):
        ordered = replica_items(dataset, dp_size, replica, cfg.sort_by_length, assignment=owner)
        read = sorted({c for row in ordered if row.contexts is not None for c in row.contexts} - {-1})
        forward = prefix_forward({c: prefixes[c] for c in read}, cfg, pad_multiple, pad_id)
        prefix_stats = _prefix_stats(forward, {c: prefixes[c] for c in read}, ordered)
        stats.add(prefix_stats)
        lengths = {c: len(prefixes[c]) for c in read}
        for doc_index, tokens in prefix_doc_tokens(prefix_stats.processed_tokens, lengths, ordered, slot_doc).items():
            specs[doc_index].processed_tokens += tokens
        if replica == dp_rank:
            mine_prefixes = forward
        fixed = None if cfg.pad_per_batch else longest
        cost = lambda row: round_up(row.token_length, pad_multiple)  # noqa: E731
        budget = batch_budget([fixed or cost(row) for row in ordered], cfg.tokens_per_batch, min_batches)
        for batch_rows in cut_batches(ordered, cost, budget, cfg.max_rows_per_batch, fixed):
            width = fixed or round_up(max(row.token_length for row in batch_rows), pad_multiple)
            for row in batch_rows:
                for doc_index in row.doc_indices:
                    specs[doc_index].padded_tokens_count += width - row.token_length
                for doc_index, tokens in row_doc_tokens(row, width, slot_doc).items():
                    specs[doc_index].processed_tokens += tokens
            batch = _to_batch(batch_rows, width, pad_id)
            stats.add(_batch_stats(batch_rows, batch, width, cfg))
            if replica == dp_rank:
                mine.append(batch)
    return mine, stats, mine_prefixes


def prefix_forward(
    prefixes: dict[int, tuple[int, ...]], cfg: EngineConfig, pad_multiple: int, pad_id: int
) -> PrefixForward:
    """Micro-batches computing `prefixes` (index -> tokens): chains packed next-fit into rows of
    `pack_width` nodes (a longer prefix gets a row of its own), rows cut by the token budget."""
    width = max([cfg.pack_width] + [len(t) for t in prefixes.values()])
    rows: list[list[tuple[int, tuple[int, ...]]]] = []
    for index, tokens in prefixes.items():
        if not rows or sum(len(t) for _, t in rows[-1]) + len(tokens) > width:
            rows.append([])
        rows[-1].append((index, tokens))
    per_batch = max(1, min(cfg.max_rows_per_batch, cfg.tokens_per_batch // width))
    forward, base = PrefixForward(), 0
    for first in range(0, len(rows), per_batch):
        chunk = rows[first : first + per_batch]
        model_rows_ = [_prefix_row(row) for row in chunk]
        width = round_up(max(row.token_length for row in model_rows_), pad_multiple)
        forward.batches.append(_to_batch(model_rows_, width, pad_id))
        for r, row in enumerate(chunk):
            start = base + r * width
            for index, tokens in row:
                forward.nodes[index] = torch.arange(start, start + len(tokens))
                start += len(tokens)
        base += len(chunk) * width
    return forward


def _prefix_row(prefixes: list[tuple[int, tuple[int, ...]]]) -> ModelRow:
    tokens, parents, depths = [], [], []
    for _, chain in prefixes:
        first = len(tokens)
        tokens += chain
        parents += [first] + list(range(first, first + len(chain) - 1))
        depths += list(range(len(chain)))
    return ModelRow(tuple(tokens), tuple(parents), tuple(depths), (), (), (), ())


def _prefix_stats(forward: PrefixForward, prefixes: dict[int, tuple[int, ...]], rows: Sequence[ModelRow]) -> PlanStats:
    processed = sum(batch.input_ids.numel() for batch in forward.batches)
    tokens = sum(len(t) for t in prefixes.values())
    reads = 0
    for row in rows:
        if row.contexts is not None:
            for c in set(row.contexts) - {-1}:
                reads += len(prefixes[c])
    return PlanStats(
        processed_tokens=processed,
        padding_tokens=processed - tokens,
        attention_pairs=sum(len(t) * (len(t) + 1) // 2 for t in prefixes.values()) + processed - tokens,
        batches=len(forward.batches),
        shared_prefixes=len(prefixes),
        shared_prefix_tokens=tokens,
        shared_prefix_reads=reads,
    )


def _batch_stats(rows: Sequence[ModelRow], batch: ScoringBatch, width: int, cfg: EngineConfig) -> PlanStats:
    processed = len(rows) * width
    pads = processed - sum(row.token_length for row in rows)
    if rows[0].parents is None:  # Nanotron's causal forward over the padded width
        pairs = len(rows) * width * (width + 1) // 2
    else:  # pads attend to themselves only
        pairs = sum(row.attention_pairs for row in rows) + pads
    logits = batch.read_rows.numel() if cfg.logits_at_targets else processed
    return PlanStats(
        processed_tokens=processed,
        padding_tokens=pads,
        logit_positions=logits,
        attention_pairs=pairs,
        rows=len(rows),
        batches=1,
    )
