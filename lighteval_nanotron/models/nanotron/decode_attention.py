"""Attention of cached decoding: right-padded causal prefill, then one token per row and step.

The generation pool keeps, per decoder layer of this stage, keys and values `[rows, kv heads,
capacity, head dim]` (heads before slots, so the first `kv_len` slots of a head are one
contiguous block), in the dtype attention computes in. The cache's grouped-query heads are never
expanded: at a decode step the queries of a KV group attend as several queries of that KV head.

- `CausalPrefill`: new rows, right-padded, causal within each row. A real token never sees a pad
  (pads come after it), so plain `is_causal` attention (no mask tensor, the fused kernel) gives
  exactly the masked result for every real token; pads get values nobody reads, and their cache
  slots are overwritten by the row's generated tokens before any query can see them.
- `CachedDecode`: each running row's newest token at its own position, written at slot
  `lengths[r]`, attending to slots `0..lengths[r]` of its row.

Rotary positions and math are the tree attention's (`tree_attention.rotate`), so both paths give
the same numbers as Nanotron's forward up to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from lighteval_nanotron.models.families.base import DecoderLayer
from lighteval_nanotron.models.nanotron.tree_attention import apply_rotary, rotary_tables


def attention_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """fp32 on CPU (as the tree attention), the model dtype elsewhere."""
    return torch.float32 if device.type == "cpu" else dtype


@dataclass
class PoolCache:
    """Keys and values of the running rows of one decoding pool; `lengths[r]` slots of row r are filled."""

    capacity: int
    lengths: torch.Tensor
    keys: dict[int, torch.Tensor] = field(default_factory=dict)
    values: dict[int, torch.Tensor] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.lengths.shape[0])

    def keep_rows(self, keep: torch.Tensor) -> None:
        """Keep only rows `keep` (ascending indices), in that order."""
        self.lengths = self.lengths[keep]
        for store in (self.keys, self.values):
            for layer, tensor in store.items():
                store[layer] = tensor.index_select(0, keep.to(tensor.device))

    def extend(self, other: "PoolCache") -> None:
        """Append `other`'s rows after these (same capacity and layers)."""
        if not self.keys:
            self.keys, self.values, self.lengths = other.keys, other.values, other.lengths
            return
        self.lengths = torch.cat([self.lengths, other.lengths])
        for store, more in ((self.keys, other.keys), (self.values, other.values)):
            for layer in store:
                store[layer] = torch.cat([store[layer], more[layer]])


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
    """Right-padded contexts `[rows, width]` at positions `0..width-1`; fills `cache` (a new
    `PoolCache` for these rows) in slots `0..width-1`."""

    cache: PoolCache
    width: int

    def __post_init__(self) -> None:
        device = self.cache.lengths.device
        self.positions = torch.arange(self.width, device=device).expand(self.cache.rows, self.width)

    def _attention(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        q, k, v = self._project(layer, hidden, attention_dtype(hidden.device, hidden.dtype))
        shape = (k.shape[0], k.shape[1], self.cache.capacity, k.shape[3])
        keys, values = k.new_zeros(shape), v.new_zeros(shape)
        keys[:, :, : self.width] = k
        values[:, :, : self.width] = v
        self.cache.keys[index], self.cache.values[index] = keys, values
        group = q.shape[1] // k.shape[1]  # expanded for this one call: faster than enable_gqa here (CPU)
        out = F.scaled_dot_product_attention(
            q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), is_causal=True
        )
        return _finish(layer, out, hidden.dtype)


@dataclass
class CachedDecode(_CacheAttention):
    """One new token per row at position `lengths[r]` (the cache's lengths before this step)."""

    cache: PoolCache
    lengths: torch.Tensor
    kv_len: int
    mask: torch.Tensor  # [rows, 1, 1, kv_len]: slots 0..lengths[r]

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
        keys, values = self.cache.keys[index], self.cache.values[index]
        rows = torch.arange(q.shape[0], device=keys.device)
        keys[rows, :, self.lengths] = k[:, :, 0]
        values[rows, :, self.lengths] = v[:, :, 0]
        rows, heads, _, dim = q.shape
        kv = keys.shape[1]
        # the one query of each head of a KV group attends like `group` queries of that KV head
        grouped = q.reshape(rows, kv, heads // kv, dim)
        out = F.scaled_dot_product_attention(
            grouped, keys[:, :, : self.kv_len], values[:, :, : self.kv_len], attn_mask=self.mask
        )
        return _finish(layer, out.reshape(rows, heads, 1, dim), hidden.dtype)
