"""Attention of cached decoding: unpadded causal prefill, then one token per row and step.

The generation pool keeps, per decoder layer of this stage, keys and values `[slots, kv heads,
capacity, head dim]` (heads before positions, so the first `kv_len` positions of a head are one
contiguous block), allocated once for the pool's rows, in the dtype attention computes in. The
running rows are the first `rows` slots; a row that leaves is replaced by the last running row
(one row copied, not the whole cache), and joining rows take the slots after the running ones.
The cache's grouped-query heads are never expanded: at a decode step the queries of a KV group
attend as several queries of that KV head.

- `CausalPrefill`: joining rows concatenated without padding (`[1, total tokens]`): every linear
  layer runs on all their tokens at once, attention is causal within each row (the fused kernel,
  no mask tensor), and each row's keys and values go to its slot.
- `CachedDecode`: each running row's newest token at its own position, written at position
  `lengths[r]` of its slot, attending to positions `0..lengths[r]` of its slot.

Rotary tables and math are the tree attention's (`tree_attention.rotary_tables`, `apply_rotary`), so both paths give
the same numbers as Nanotron's forward up to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from lighteval_nanotron.models.engine.tree_attention import apply_rotary, rotary_tables
from lighteval_nanotron.models.families.base import DecoderLayer


def attention_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """fp32 on CPU (as the tree attention), the model dtype elsewhere."""
    return torch.float32 if device.type == "cpu" else dtype


@dataclass
class PoolCache:
    """Keys and values of one decoding pool: `slots` rows of `capacity` positions per layer, the
    first `rows` running; `lengths[r]` positions of running row r are filled."""

    slots: int
    capacity: int
    lengths: torch.Tensor  # [rows]
    keys: dict[int, torch.Tensor] = field(default_factory=dict)
    values: dict[int, torch.Tensor] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.lengths.shape[0])

    def store(self, index: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer `index`'s keys and values, allocated (zeros: masked positions stay finite) on first use."""
        if index not in self.keys:
            shape = (self.slots, like.shape[1], self.capacity, like.shape[3])
            self.keys[index], self.values[index] = like.new_zeros(shape), like.new_zeros(shape)
        return self.keys[index], self.values[index]

    def drop_rows(self, gone: list[int]) -> list[int]:
        """Remove running rows `gone`; each hole below the new row count takes the last running row
        that stays. Returns, for each new row, the old row it holds."""
        order = list(range(self.rows))
        kept = self.rows - len(gone)
        gone_set = set(gone)
        holes = [r for r in sorted(gone_set) if r < kept]
        movers = [r for r in range(kept, self.rows) if r not in gone_set]
        lengths = self.lengths.clone()
        for hole, mover in zip(holes, movers):
            filled = int(lengths[mover])
            for store in (self.keys, self.values):
                for tensor in store.values():
                    tensor[hole, :, :filled] = tensor[mover, :, :filled]
            lengths[hole] = lengths[mover]
            order[hole] = mover
        self.lengths = lengths[:kept]
        return order[:kept]


class _CacheAttention:
    """`run_layer` of both steps; the rotary tables of a step are computed once for all its layers."""

    positions: torch.Tensor  # [rows, seq]

    def run_layer(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        """One decoder layer on `[seq, rows, hidden]`."""
        residual = hidden
        hidden = self._attention(layer, layer.attention_norm(hidden), index) + residual
        residual = hidden
        return layer.mlp(layer.mlp_norm(hidden)) + residual

    def _attention(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        raise NotImplementedError

    def _project(self, layer: DecoderLayer, hidden: torch.Tensor, compute: torch.dtype):
        """q `[rows, q heads, seq, dim]`, k and v `[rows, kv heads, seq, dim]` in `compute`."""
        projected = layer.qkv(hidden)
        seq, rows, _ = projected[0].shape
        q, k, v = (t.transpose(0, 1).reshape(rows, seq, -1, layer.head_dim) for t in projected)
        if layer.rotary is not None:
            cos, sin = self._tables(layer, q)
            q = apply_rotary(q, cos, sin, layer.rotary.interleaved)
            k = apply_rotary(k, cos, sin, layer.rotary.interleaved)
        return (t.transpose(1, 2).to(compute) for t in (q, k, v))

    def _tables(self, layer: DecoderLayer, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = (float(layer.rotary.base), q.shape[-1], q.dtype)
        tables = self.__dict__.setdefault("_rotary", {})
        if key not in tables:
            tables[key] = rotary_tables(self.positions, q.shape[-1], layer.rotary.base, q.device, q.dtype)
        return tables[key]


def _finish(layer: DecoderLayer, out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    rows, heads, seq, dim = out.shape
    return layer.attention_out(out.to(dtype).transpose(1, 2).reshape(rows, seq, heads * dim).transpose(0, 1))


@dataclass
class CausalPrefill(_CacheAttention):
    """Joining rows of `lengths` tokens, concatenated as one sequence `[1, sum(lengths)]`, each at
    positions `0..length-1`; row j's keys and values fill slot `first_slot + j` of `cache`."""

    cache: PoolCache
    first_slot: int
    lengths: list[int]

    def __post_init__(self) -> None:
        device = self.cache.lengths.device
        self.positions = torch.cat([torch.arange(n, device=device) for n in self.lengths])[None]

    def _attention(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        q, k, v = self._project(layer, hidden, attention_dtype(hidden.device, hidden.dtype))
        keys, values = self.cache.store(index, k)
        group = q.shape[1] // k.shape[1]
        outs, start = [], 0
        for j, n in enumerate(self.lengths):
            slot, end = self.first_slot + j, start + n
            keys[slot, :, :n] = k[0, :, start:end]
            values[slot, :, :n] = v[0, :, start:end]
            # expanded for this one call: faster than enable_gqa here (CPU)
            kr, vr = (t[:, :, start:end].repeat_interleave(group, dim=1) for t in (k, v))
            outs.append(F.scaled_dot_product_attention(q[:, :, start:end], kr, vr, is_causal=True))
            start = end
        return _finish(layer, torch.cat(outs, dim=2) if len(outs) > 1 else outs[0], hidden.dtype)


@dataclass
class CachedDecode(_CacheAttention):
    """One new token per running row at position `lengths[r]` (the cache's lengths before this step)."""

    cache: PoolCache
    lengths: torch.Tensor
    kv_len: int
    mask: torch.Tensor  # [rows, 1, 1, kv_len]: positions 0..lengths[r]

    @classmethod
    def build(cls, cache: PoolCache) -> "CachedDecode":
        lengths = cache.lengths
        kv_len = int(lengths.max()) + 1
        mask = torch.arange(kv_len, device=lengths.device)[None, :] <= lengths[:, None]
        return cls(cache, lengths, kv_len, mask[:, None, None, :])

    def __post_init__(self) -> None:
        self.positions = self.lengths[:, None]

    def _attention(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        q, k, v = self._project(layer, hidden, attention_dtype(hidden.device, hidden.dtype))
        rows, heads, _, dim = q.shape
        keys, values = self.cache.keys[index][:rows], self.cache.values[index][:rows]
        slots = torch.arange(rows, device=keys.device)
        keys[slots, :, self.lengths] = k[:, :, 0]
        values[slots, :, self.lengths] = v[:, :, 0]
        kv = keys.shape[1]
        # the one query of each head of a KV group attends like `group` queries of that KV head
        grouped = q.reshape(rows, kv, heads // kv, dim)
        out = F.scaled_dot_product_attention(
            grouped, keys[:, :, : self.kv_len], values[:, :, : self.kv_len], attn_mask=self.mask
        )
        return _finish(layer, out.reshape(rows, heads, 1, dim), hidden.dtype)
