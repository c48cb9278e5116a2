"""Which doc a batch's token positions were computed for: the rule behind per-task costs.

A chain row belongs to its one doc. A prefix-tree row (several docs packed together, a
few-shot prefix shared between them) splits its nodes: each node equally among the docs whose
scored sequences pass through it (a node reached by k docs counts 1/k for each); padding and
nodes no target reads (the last token of a sequence) are split in proportion to those shares.
So a row's `width` positions are split exactly, and a plan's per-doc counts add up to its
`processed_tokens`. Pure and deterministic, computed once when the plan is built.
"""

from __future__ import annotations

from collections.abc import Sequence

from lighteval_nanotron.models.engine.packing import ModelRow


def row_doc_tokens(row: ModelRow, width: int, slot_doc: Sequence[int]) -> dict[int, float]:
    """`{doc index: token positions}` of one row padded to `width` (the values add up to `width`)."""
    if len(row.doc_indices) == 1 or row.parents is None:
        return {row.doc_indices[0]: float(width)}
    users: list[set[int]] = [set() for _ in range(row.token_length)]
    for position, slot in zip(row.positions, row.slots):
        doc, node = slot_doc[slot], position
        while doc not in users[node]:
            users[node].add(doc)
            parent = row.parents[node]
            if parent == node:
                break
            node = parent
    shares = dict.fromkeys(row.doc_indices, 0.0)
    for docs in users:
        for doc in docs:
            shares[doc] += 1.0 / len(docs)
    reached = sum(shares.values())
    if reached == 0:
        return {doc: width / len(shares) for doc in shares}
    return {doc: share * width / reached for doc, share in shares.items()}


def slot_docs(slots_of_docs: Sequence[Sequence[int]]) -> list[int]:
    """The doc index of every result slot, from each doc's slots."""
    owner = [-1] * (max((max(slots) for slots in slots_of_docs if slots), default=-1) + 1)
    for doc, slots in enumerate(slots_of_docs):
        for slot in slots:
            owner[slot] = doc
    return owner


def prefix_doc_tokens(
    processed: int, prefix_lengths: dict[int, int], rows: Sequence[ModelRow], slot_doc: Sequence[int]
) -> dict[int, float]:
    """`{doc index: token positions}` of the shared prefixes computed once for `rows`: the
    `processed` positions (padding included) split among the prefixes by length, then each
    prefix's share equally among the docs whose scored nodes see it (the values add up to
    `processed` when every prefix is read)."""
    readers: dict[int, set[int]] = {prefix: set() for prefix in prefix_lengths}
    for row in rows:
        if row.contexts is None:
            continue
        for position, slot in zip(row.positions, row.slots):
            prefix = row.contexts[position]
            if prefix in readers:
                readers[prefix].add(slot_doc[slot])
    total = sum(prefix_lengths.values())
    shares: dict[int, float] = {}
    for prefix, docs in readers.items():
        if not docs or total == 0:
            continue
        per_doc = processed * prefix_lengths[prefix] / total / len(docs)
        for doc in docs:
            shares[doc] = shares.get(doc, 0.0) + per_doc
    return shares
