"""Model rows built from scored token sequences: plain chains, or prefix trees.

A scored sequence is one model input (`input_ids`) and the positions whose logits predict its
targets. A row is what one batch line feeds the model:

- a chain (`parents is None`): one sequence, run by Nanotron's own causal forward;
- a prefix tree: nodes are tokens, each node's parent is the previous token of its sequence,
  identical prefixes are one path (`share`), position id = depth. A doc's context appears once
  for all its choices; in packed rows, a few-shot prefix appears once for several docs and
  several docs fill one row with no padding between them. Every node attends to itself and its
  ancestors only (`tree_attention.ancestor_mask`), so each target sees exactly its own sequence.

A sequence may start after a shared prefix (`context >= 0`, see `shared_prefix`): its tokens are
what follows the prefix, its nodes sit at depth `context_length + k` and attend to the prefix's
keys and values, computed once per evaluation, besides their ancestors in the row.

Pure and deterministic (same rows on every rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class ScoredSequence:
    """One model input; logits at `positions[k]` predict `targets[k]`, added to result `slots[k]`."""

    input_ids: tuple[int, ...]
    positions: tuple[int, ...]
    targets: tuple[int, ...]
    slots: tuple[int, ...]
    doc_index: int
    context: int = -1
    """The shared prefix this sequence continues (-1: none); `input_ids` follow it."""
    context_length: int = 0
    """Tokens of that prefix (the depth of this sequence's first token)."""

    @property
    def token_length(self) -> int:
        return len(self.input_ids)


@dataclass(frozen=True)
class ModelRow:
    """One batch line: node tokens, their parents and depths (None for a chain), and the targets
    read from it (`positions[k]` is the node whose logits predict `targets[k]`)."""

    input_ids: tuple[int, ...]
    parents: tuple[int, ...] | None
    depths: tuple[int, ...] | None
    positions: tuple[int, ...]
    targets: tuple[int, ...]
    slots: tuple[int, ...]
    doc_indices: tuple[int, ...]
    contexts: tuple[int, ...] | None = None
    """The shared prefix each node sees (-1: none; None: no node sees one)."""

    @property
    def token_length(self) -> int:
        return len(self.input_ids)

    @property
    def attention_pairs(self) -> int:
        """(query, key) pairs the row needs: ancestors-or-self per node, a shared prefix's
        positions included (a chain: causal)."""
        if self.depths is None:
            return self.token_length * (self.token_length + 1) // 2
        return sum(depth + 1 for depth in self.depths)


def chain_row(sequence: ScoredSequence) -> ModelRow:
    return ModelRow(
        sequence.input_ids, None, None, sequence.positions, sequence.targets, sequence.slots, (sequence.doc_index,)
    )


class _Tree:
    """A prefix tree under construction (node i's parent precedes it; roots are their own parent)."""

    def __init__(self, share: bool):
        self.share = share
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.depths: list[int] = []
        self.children: dict[tuple[int, int], int] = {}
        self.positions: list[int] = []
        self.targets: list[int] = []
        self.slots: list[int] = []
        self.docs: list[int] = []
        self.contexts: list[int] = []

    def __len__(self) -> int:
        return len(self.tokens)

    def new_nodes(self, sequence: ScoredSequence) -> int:
        if not self.share:
            return sequence.token_length
        node = _root(sequence)
        for k, token in enumerate(sequence.input_ids):
            node = self.children.get((node, token), -2)
            if node == -2:
                return sequence.token_length - k
        return 0

    def add(self, sequence: ScoredSequence) -> None:
        root = _root(sequence)
        node, nodes = root, []
        for depth, token in enumerate(sequence.input_ids, start=sequence.context_length):
            child = self.children.get((node, token)) if self.share else None
            if child is None:
                child = len(self.tokens)
                self.tokens.append(token)
                self.parents.append(child if node == root else node)
                self.depths.append(depth)
                self.contexts.append(sequence.context)
                self.children[(node, token)] = child
            nodes.append(child)
            node = child
        self.positions += [nodes[p] for p in sequence.positions]
        self.targets += sequence.targets
        self.slots += sequence.slots
        if sequence.doc_index not in self.docs:
            self.docs.append(sequence.doc_index)

    def row(self) -> ModelRow:
        return ModelRow(
            tuple(self.tokens),
            tuple(self.parents),
            tuple(self.depths),
            tuple(self.positions),
            tuple(self.targets),
            tuple(self.slots),
            tuple(self.docs),
            tuple(self.contexts) if any(c >= 0 for c in self.contexts) else None,
        )


def _root(sequence: ScoredSequence) -> int:
    """The virtual parent of a sequence's first token: sequences after different shared
    prefixes never share nodes."""
    return -1 if sequence.context < 0 else -2 - sequence.context


def tree_rows(groups: Iterable[Sequence[ScoredSequence]], share: bool) -> list[ModelRow]:
    """One prefix-tree row per group (e.g. all sequences of one doc)."""
    rows = []
    for group in groups:
        tree = _Tree(share)
        for sequence in group:
            tree.add(sequence)
        rows.append(tree.row())
    return rows


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _cuts(sequences: Sequence[ScoredSequence], order: list[int], width: int, share: bool, parts: int) -> set[int]:
    """Where (index into `order`) each replica's part starts: about equal new nodes per part,
    moved to a point where neighbours share little (a cut inside a shared few-shot prefix would
    compute that prefix twice), within a quarter part's slack."""
    costs, tree = [], _Tree(share)
    for i in order:
        if len(tree) and len(tree) + tree.new_nodes(sequences[i]) > width:
            tree = _Tree(share)
        costs.append(tree.new_nodes(sequences[i]))
        tree.add(sequences[i])
    share_of_part = sum(costs) / parts
    cuts, done = set(), 0
    for k, cost in enumerate(costs):
        target = share_of_part * (len(cuts) + 1)
        if k and len(cuts) + 1 < parts and done >= target:
            before, after = sequences[order[k - 1]], sequences[order[k]]
            same_context = before.context >= 0 and before.context == after.context
            if (not same_context and _common_prefix(before.input_ids, after.input_ids) < 16) or (
                done >= target + share_of_part / 4
            ):
                cuts.add(k)
        done += cost
    return cuts


def _doc_costs(sequences: Sequence[ScoredSequence], order: list[int], share: bool) -> dict[int, int]:
    """At the first of each run of neighbours of one doc (index into `order`): the nodes the rest
    of the run adds after its first sequence (at most; a doc's context shared by its choices)."""
    costs, start = {}, 0
    for k in range(1, len(order) + 1):
        if k == len(order) or sequences[order[k]].doc_index != sequences[order[start]].doc_index:
            run = [sequences[i] for i in order[start:k]]
            costs[start] = sum(
                b.token_length - (_common_prefix(a.input_ids, b.input_ids) if share else 0)
                for a, b in zip(run, run[1:])
            )
            start = k
    return costs


BALANCED_ROWS = 16
"""Packings of at most this many rows are rebalanced (see `packed_rows`)."""


def packed_rows(sequences: Sequence[ScoredSequence], width: int, share: bool, parts: int = 1) -> list[list[ModelRow]]:
    """Sequences in token order (so shared prefixes are neighbours) cut into `parts` contiguous
    parts of about equal work (one per data-parallel replica), each filled into prefix trees of at
    most `max(width, longest sequence)` nodes, next-fit by doc: a doc's neighbouring sequences
    (its choices) start a new row together when they do not all fit, so its context is not
    computed again in the next row (unless they fill more than a row on their own). A packing of
    few rows is refilled with the narrowest width giving no more rows, so its last row is not
    much shorter than the others (a micro-batch pads every row to its longest)."""
    width = max([width] + [s.token_length for s in sequences])
    order = sorted(range(len(sequences)), key=lambda i: (sequences[i].context, sequences[i].input_ids, i))
    groups = _next_fit(sequences, order, width, share, parts)
    rows = sum(len(group) for group in groups)
    if rows <= 1 or rows > BALANCED_ROWS:
        return groups
    nodes = sum(row.token_length for group in groups for row in group)
    lo, hi = max(-(-nodes // rows), max(s.token_length for s in sequences)), width
    while lo < hi:  # the narrowest width in [nodes / rows, width] that needs no more rows
        mid = (lo + hi) // 2
        if sum(len(group) for group in _next_fit(sequences, order, mid, share, parts)) <= rows:
            hi = mid
        else:
            lo = mid + 1
    return _next_fit(sequences, order, hi, share, parts)


def _next_fit(
    sequences: Sequence[ScoredSequence], order: list[int], width: int, share: bool, parts: int
) -> list[list[ModelRow]]:
    cuts = _cuts(sequences, order, width, share, parts) if parts > 1 else set()
    doc_costs = _doc_costs(sequences, order, share)
    groups: list[list[ModelRow]] = [[] for _ in range(parts)]
    tree, part = _Tree(share), 0
    for k, i in enumerate(order):
        new = tree.new_nodes(sequences[i])
        if len(tree) and (k in cuts or len(tree) + new + doc_costs.get(k, 0) > width):
            groups[part].append(tree.row())
            tree = _Tree(share)
        part += int(k in cuts)
        tree.add(sequences[i])
    if len(tree):
        groups[part].append(tree.row())
    return groups
