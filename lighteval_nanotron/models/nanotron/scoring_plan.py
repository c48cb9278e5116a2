"""Log-likelihood and rolling log-likelihood requests turned into scoring rows and micro-batches.

A scoring row is one model input plus the positions whose logits are read and the token each of
them predicts; every target adds its log-probability to a result slot. A multiple-choice doc gets
one slot per choice (and one per choice for the unconditioned query); a rolling doc one slot for
all its windows. Everything here is pure and deterministic: every rank builds the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from lighteval_nanotron.data import LoglikelihoodDataset
from lighteval_nanotron.models.nanotron.batching import assign_replicas, cut_batches, replica_order, round_up
from lighteval_nanotron.models.nanotron.config import EngineConfig
from lighteval_nanotron.models.nanotron.tokenization import TokenizerAdapter, Window, encode_pair, rolling_windows, score_window
from lighteval_nanotron.tasks.requests import Doc

PromptFn = Callable[[Doc], str]


@dataclass(frozen=True)
class ScoringRow:
    input_ids: tuple[int, ...]
    positions: tuple[int, ...]
    targets: tuple[int, ...]
    slots: tuple[int, ...]
    doc_index: int

    @property
    def token_length(self) -> int:
        return len(self.input_ids)


@dataclass
class ScoringBatch:
    """One micro-batch: right-padded input ids and flat index tensors of what to score."""

    input_ids: torch.Tensor  # [rows, seq] int64
    rows: torch.Tensor  # [n] row of each target
    positions: torch.Tensor  # [n] position whose logits predict the target
    targets: torch.Tensor  # [n] target token ids
    slots: torch.Tensor  # [n] result slot of each target


@dataclass
class ResponseSpec:
    """What is known about one doc's response before the model runs."""

    input: str
    input_tokens: list[int]
    output_tokens: list[list[int]]
    slots: list[int]
    unconditioned_slots: list[int] | None = None
    truncated_tokens_count: int = 0
    padded_tokens_count: int = 0


@dataclass
class ScoringPlan:
    """Prepared once; `NanotronLightevalModel.run(plan)` evaluates it at any checkpoint."""

    kind: str
    specs: list[ResponseSpec]
    num_slots: int
    batches: list[ScoringBatch] = field(default_factory=list)


def _row(window: Window, slots: Sequence[int], doc_index: int) -> ScoringRow:
    positions = tuple(window.start + k for k in range(len(window.targets)))
    return ScoringRow(window.input_ids, positions, window.targets, tuple(slots), doc_index)


def _choice_rows(
    tok: TokenizerAdapter, context: str, choices: list[str], first_slot: int, doc_index: int, cfg: EngineConfig, max_length: int
) -> tuple[list[ScoringRow], list[int], list[list[int]], int]:
    """Rows scoring each choice after `context`; returns rows, context tokens, continuation tokens,
    and the number of context tokens cut from the left."""
    pairs = [encode_pair(tok, context, c, cfg.add_special_tokens, cfg.pairwise_tokenization) for c in choices]
    slots = list(range(first_slot, first_slot + len(choices)))
    contexts = [ctx for ctx, _ in pairs]
    continuations = [cont for _, cont in pairs]
    shareable = cfg.shared_context and all(len(c) == 1 for c in continuations) and all(c == contexts[0] for c in contexts)
    if shareable and choices:
        window, cut = score_window(contexts[0], continuations[0], max_length)
        row = ScoringRow(window.input_ids, (window.start,) * len(choices), tuple(c[0] for c in continuations), tuple(slots), doc_index)
        return [row], contexts[0], continuations, cut
    rows, cut = [], 0
    for (ctx, cont), slot in zip(pairs, slots):
        window, cut_here = score_window(ctx, cont, max_length)
        rows.append(_row(window, [slot] * len(window.targets), doc_index))
        cut = max(cut, cut_here)
    return rows, (contexts[0] if contexts else []), continuations, cut


def loglikelihood_rows(
    docs: Sequence[Doc], tok: TokenizerAdapter, prompt_fn: PromptFn, cfg: EngineConfig, max_length: int, unconditioned: bool
) -> tuple[list[ScoringRow], list[ResponseSpec], int]:
    rows: list[ScoringRow] = []
    specs: list[ResponseSpec] = []
    next_slot = 0
    for index, doc in enumerate(docs):
        context = prompt_fn(doc)
        choices = list(doc.choices or [])
        doc_rows, ctx_ids, continuations, cut = _choice_rows(tok, context, choices, next_slot, index, cfg, max_length)
        spec = ResponseSpec(context, ctx_ids, continuations, list(range(next_slot, next_slot + len(choices))), None, cut)
        next_slot += len(choices)
        if unconditioned and doc.unconditioned_query is not None:
            extra, _, _, _ = _choice_rows(tok, doc.unconditioned_query, choices, next_slot, index, cfg, max_length)
            doc_rows += extra
            spec.unconditioned_slots = list(range(next_slot, next_slot + len(choices)))
            next_slot += len(choices)
        rows += doc_rows
        specs.append(spec)
    return rows, specs, next_slot


def rolling_rows(
    docs: Sequence[Doc], tok: TokenizerAdapter, prompt_fn: PromptFn, cfg: EngineConfig, max_length: int
) -> tuple[list[ScoringRow], list[ResponseSpec], int]:
    rows: list[ScoringRow] = []
    specs: list[ResponseSpec] = []
    stride = cfg.stride_for(max_length)
    for index, doc in enumerate(docs):
        text = prompt_fn(doc)
        tokens = tok.encode(text, add_special_tokens=False)
        for window in rolling_windows(tokens, tok.prefix_token_id, max_length, stride):
            rows.append(_row(window, [index] * len(window.targets), index))
        specs.append(ResponseSpec(text, tokens, [tokens], [index]))
    return rows, specs, len(docs)


def _to_batch(rows: Sequence[ScoringRow], width: int, pad_id: int) -> ScoringBatch:
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    flat: list[tuple[int, int, int, int]] = []
    for r, row in enumerate(rows):
        input_ids[r, : row.token_length] = torch.tensor(row.input_ids, dtype=torch.long)
        flat += [(r, p, t, s) for p, t, s in zip(row.positions, row.targets, row.slots)]
    columns = torch.tensor(flat, dtype=torch.long).reshape(-1, 4).T
    return ScoringBatch(input_ids, columns[0], columns[1], columns[2], columns[3])


def build_batches(
    rows: list[ScoringRow], specs: list[ResponseSpec], cfg: EngineConfig, dp_size: int, dp_rank: int, pad_multiple: int, pad_id: int
) -> list[ScoringBatch]:
    """This replica's micro-batches; also fills every spec's padded-token count (all replicas)."""
    dataset = LoglikelihoodDataset(rows, num_dataset_splits=None)
    owner = assign_replicas([row.token_length for row in rows], dp_size)
    longest = round_up(max((row.token_length for row in rows), default=1), pad_multiple)
    mine: list[ScoringBatch] = []
    for replica in range(dp_size):
        ordered = replica_order(dataset, owner, replica, cfg.sort_by_length)
        fixed = None if cfg.pad_per_batch else longest
        for batch_rows in cut_batches(ordered, lambda row: round_up(row.token_length, pad_multiple), cfg.max_tokens_per_batch, cfg.max_rows_per_batch, fixed):
            width = fixed or round_up(max(row.token_length for row in batch_rows), pad_multiple)
            for row in batch_rows:
                specs[row.doc_index].padded_tokens_count += width - row.token_length
            if replica == dp_rank:
                mine.append(_to_batch(batch_rows, width, pad_id))
    return mine
