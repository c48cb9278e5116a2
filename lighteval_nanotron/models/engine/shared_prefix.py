"""Prefixes shared by many docs (a task's few-shot examples), found before packing.

Packed prefix trees already compute a prefix once per row; a prefix shared by more docs than fit
in one row would still be computed once per row. Here such prefixes are taken out of the
sequences: each is computed once per evaluation (`scoring.run_scoring`) and its keys and values
are read by every node that follows it, in every row. Pure and deterministic.

Groups: sequences in token order; neighbours whose common prefix (capped at each one's first
read position, whose logits must be computed in its row) is shorter than `min_tokens` never
share. A run of neighbours is one group with the run's smallest common prefix, or is split at
its weakest links when that saves more positions (saving: prefix length x (docs - 1)). A group
whose nodes fit in one packed row (`row_width`) stays in its sequences: the row shares the
prefix already, and computing it apart would add a forward for nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from lighteval_nanotron.models.engine.packing import ScoredSequence


def _limit(sequence: ScoredSequence) -> int:
    """Longest prefix of this sequence that may be shared: up to its first read position."""
    return sequence.positions[0] if sequence.positions else 0


def _common(a: ScoredSequence, b: ScoredSequence) -> int:
    n, cap = 0, min(_limit(a), _limit(b))
    for x, y in zip(a.input_ids[:cap], b.input_ids[:cap]):
        if x != y:
            break
        n += 1
    return n


def _groups(links: list[int], docs: list[int], lo: int, hi: int, min_tokens: int) -> list[tuple[int, int, int]]:
    """Best groups `(first, last, prefix length)` of the run `lo..hi` (indices into the ordered
    sequences; `links[k]`: common prefix of `k` and `k + 1`)."""
    if lo == hi:
        return []
    weakest = min(links[lo:hi])
    whole = [(lo, hi, weakest)] if weakest >= min_tokens and len(set(docs[lo : hi + 1])) > 1 else []
    value = weakest * (len(set(docs[lo : hi + 1])) - 1) if whole else 0
    cuts = [k for k in range(lo, hi) if links[k] == weakest]
    parts, start = [], lo
    for k in cuts + [hi]:
        parts += _groups(links, docs, start, k, min_tokens)
        start = k + 1
    split_value = sum(length * (len(set(docs[a : b + 1])) - 1) for a, b, length in parts)
    return parts if split_value > value else whole


def _nodes(ordered: list[ScoredSequence], first: int, last: int) -> int:
    """Prefix-tree nodes of `ordered[first..last]` (neighbours in token order)."""
    run = ordered[first : last + 1]
    return run[0].token_length + sum(
        b.token_length - next((n for n, (x, y) in enumerate(zip(a.input_ids, b.input_ids)) if x != y), len(a.input_ids))
        for a, b in zip(run, run[1:])
    )


def split_shared_prefixes(
    sequences: Sequence[ScoredSequence], min_tokens: int, row_width: int | None = None
) -> tuple[list[ScoredSequence], list[tuple[int, ...]]]:
    """The sequences (those in a group: what follows their group's prefix, with `context` =
    the prefix's index) in their input order, and the prefixes' tokens. `row_width`: groups
    of at most that many nodes are left in their sequences (None: none is)."""
    order = sorted(range(len(sequences)), key=lambda i: (sequences[i].input_ids, i))
    ordered = [sequences[i] for i in order]
    links = [_common(a, b) for a, b in zip(ordered, ordered[1:])]
    docs = [s.doc_index for s in ordered]
    groups, start = [], 0
    for k in range(len(ordered)):
        if k == len(ordered) - 1 or links[k] < min_tokens:
            groups += _groups(links, docs, start, k, min_tokens)
            start = k + 1
    if row_width is not None:
        groups = [group for group in groups if _nodes(ordered, group[0], group[1]) > row_width]
    out = list(sequences)
    prefixes: list[tuple[int, ...]] = []
    for first, last, length in groups:
        context = len(prefixes)
        prefixes.append(ordered[first].input_ids[:length])
        for k in range(first, last + 1):
            s = ordered[k]
            out[order[k]] = replace(
                s,
                input_ids=s.input_ids[length:],
                positions=tuple(p - length for p in s.positions),
                context=context,
                context_length=length,
            )
    return out, prefixes
