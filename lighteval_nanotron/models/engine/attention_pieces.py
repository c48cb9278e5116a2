"""Block-sparse attention over packed prefix-tree rows, as a few batched masked calls.

A packed row holds several docs; a node sees only itself and its ancestors (and, after a shared
prefix, that prefix's keys), so the row's attention is block diagonal: one block per segment (a
doc, or docs sharing an in-row prefix). `plan_attention` cuts each row into segments (a segment
starts where no later node sees an earlier one), each segment into pieces of at most
`PIECE_QUERIES` queries whose keys are the nodes any of them sees (the prefix positions they
read first; a doc's choices do not see each other, so a piece of one choice skips the others'
keys). Pieces of one padded shape, from every row, run as one
`scaled_dot_product_attention` call; a node that sees only itself (a pad, a one-token doc) gets
its own value, which is what softmax over one key gives. The plan and its masks are built once
per micro-batch and reused by every layer. Skipped keys are masked out, so the result is the
dense masked attention's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

PIECE_QUERIES = 128
"""Most queries of one piece (a longer segment is cut into pieces of this many queries)."""
QUERY_ROUND = 16
KEY_ROUND = 64
"""Pieces are padded to multiples of these (queries, keys) and batched by padded shape."""


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass
class PieceGroup:
    """Pieces of one padded shape `[pieces, queries, keys]`: flat query nodes (`row * seq + node`),
    key indices (into the prefix positions, then the flat nodes), which padded query slots are
    real (`slots`) and the node each of them writes (`targets`), and the boolean mask."""

    shape: tuple[int, int, int]
    queries: torch.Tensor
    keys: torch.Tensor
    slots: torch.Tensor
    targets: torch.Tensor
    allowed: torch.Tensor  # [pieces, queries, keys]
    _additive: dict[tuple[int, torch.dtype], torch.Tensor] = field(default_factory=dict, repr=False)

    def mask(self, repeat: int, dtype: torch.dtype) -> torch.Tensor:
        """Additive mask `[pieces, 1, repeat * queries, keys]` (the query heads of a KV head as
        `repeat` blocks of queries), built once per micro-batch."""
        key = (repeat, dtype)
        if key not in self._additive:
            pieces, queries, keys = self.shape
            bools = self.allowed[:, None, None].expand(pieces, 1, repeat, queries, keys)
            additive = torch.zeros(bools.shape, dtype=dtype, device=bools.device).masked_fill_(~bools, float("-inf"))
            self._additive[key] = additive.reshape(pieces, 1, repeat * queries, keys)
        return self._additive[key]


@dataclass
class AttentionPlan:
    """Piece groups, and the nodes that see only themselves (`singles`: flat node, `single_keys`:
    its index among the keys)."""

    groups: list[PieceGroup]
    singles: torch.Tensor
    single_keys: torch.Tensor


def _pieces(allowed: torch.Tensor, prefix_allowed: torch.Tensor | None) -> tuple[list[tuple], list[int]]:
    """`(row, first query, end, prefix columns, own key nodes)` per piece (the keys any of its
    queries sees), and the flat nodes that see only themselves (CPU tensors)."""
    rows, seq, _ = allowed.shape
    first = allowed.to(torch.uint8).argmax(dim=-1)  # first own key each node sees
    suffix = torch.flip(torch.cummin(torch.flip(first, [1]), dim=1).values, [1])
    starts = (suffix == torch.arange(seq)).tolist()
    reads = prefix_allowed is not None and prefix_allowed.shape[-1] > 0
    sees_prefix = prefix_allowed.any(dim=-1).tolist() if reads else None
    nothing = torch.zeros(0, dtype=torch.long)
    pieces, singles = [], []
    for r in range(rows):
        bounds = [i for i, start in enumerate(starts[r]) if start] + [seq]
        for a, b in zip(bounds, bounds[1:]):
            if b - a == 1 and not (reads and sees_prefix[r][a]):
                singles.append(r * seq + a)
                continue
            for s in range(a, b, PIECE_QUERIES):
                e = min(b, s + PIECE_QUERIES)
                own = allowed[r, s:e, :e].any(dim=0).nonzero().squeeze(-1)
                columns = prefix_allowed[r, s:e].any(dim=0).nonzero().squeeze(-1) if reads else nothing
                pieces.append((r, s, e, columns, own))
    return pieces, singles


def plan_attention(allowed: torch.Tensor, prefix_allowed: torch.Tensor | None = None) -> AttentionPlan:
    """The batched plan of `allowed` `[rows, seq, seq]` (queries are the keys: packed trees) and
    `prefix_allowed` `[rows, seq, context]` (which nodes see which prefix position)."""
    device = allowed.device
    allowed = allowed.cpu()
    prefix_allowed = None if prefix_allowed is None else prefix_allowed.cpu()
    rows, seq, _ = allowed.shape
    context = 0 if prefix_allowed is None else prefix_allowed.shape[-1]
    pieces, singles = _pieces(allowed, prefix_allowed)
    by_shape: dict[tuple[int, int], list[tuple]] = {}
    for piece in pieces:
        r, s, e, columns, own = piece
        shape = (_round_up(e - s, QUERY_ROUND), _round_up(columns.numel() + own.numel(), KEY_ROUND))
        by_shape.setdefault(shape, []).append(piece)
    groups = []
    for (queries, keys), members in sorted(by_shape.items()):
        q_index = torch.empty((len(members), queries), dtype=torch.long)
        k_index = torch.zeros((len(members), keys), dtype=torch.long)
        mask = torch.zeros((len(members), queries, keys), dtype=torch.bool)
        slots, targets = [], []
        for p, (r, s, e, columns, own) in enumerate(members):
            n, m, k = e - s, columns.numel(), own.numel()
            q_index[p] = r * seq + s
            q_index[p, :n] = torch.arange(r * seq + s, r * seq + e)
            k_index[p, :m] = columns
            k_index[p, m : m + k] = own + context + r * seq
            if m:
                mask[p, :n, :m] = prefix_allowed[r, s:e, columns]
            mask[p, :n, m : m + k] = allowed[r, s:e, own]
            mask[p, n:] = mask[p, 0]  # pad queries: any finite row, never read
            slots += range(p * queries, p * queries + n)
            targets += range(r * seq + s, r * seq + e)
        groups.append(
            PieceGroup(
                (len(members), queries, keys),
                q_index.reshape(-1).to(device),
                k_index.reshape(-1).to(device),
                torch.tensor(slots, dtype=torch.long, device=device),
                torch.tensor(targets, dtype=torch.long, device=device),
                mask.to(device),
            )
        )
    singles_t = torch.tensor(singles, dtype=torch.long, device=device)
    return AttentionPlan(groups, singles_t, singles_t + context)


def attend(
    plan: AttentionPlan,
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    compute: torch.dtype,
) -> torch.Tensor:
    """Attention of `queries` `[nodes, q heads, dim]` over `keys`/`values` `[context + nodes, kv
    heads, dim]` (prefix positions first) by the plan; `[nodes, q heads, dim]` in the queries' dtype.
    The query heads of a KV head attend as several queries of it (no expanded copy of the keys)."""
    nodes, q_heads, dim = queries.shape
    kv_heads = keys.shape[1]
    repeat = q_heads // kv_heads
    out = queries.new_empty(queries.shape)
    if plan.singles.numel():
        own = values.index_select(0, plan.single_keys).repeat_interleave(repeat, dim=1)
        out.index_copy_(0, plan.singles, own.to(out.dtype))
    for group in plan.groups:
        pieces, n_q, n_k = group.shape
        q = queries.index_select(0, group.queries).to(compute).view(pieces, n_q, kv_heads, repeat, dim)
        q = q.permute(0, 2, 3, 1, 4).reshape(pieces, kv_heads, repeat * n_q, dim)
        k = keys.index_select(0, group.keys).to(compute).view(pieces, n_k, kv_heads, dim).transpose(1, 2)
        v = values.index_select(0, group.keys).to(compute).view(pieces, n_k, kv_heads, dim).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=group.mask(repeat, compute))
        o = o.view(pieces, kv_heads, repeat, n_q, dim).permute(0, 3, 1, 2, 4).reshape(pieces * n_q, q_heads, dim)
        out.index_copy_(0, group.targets, o.index_select(0, group.slots).to(out.dtype))
    return out
