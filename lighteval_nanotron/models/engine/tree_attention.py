"""A decoder layer run with explicit position ids and an explicit attention mask.

Nanotron 0.4's attention takes no custom mask (its full-sequence path is causal per row) and its
KV-cache path gets rotary positions wrong when more than one new token is fed. The engine
therefore runs each decoder layer from the layer's own submodules, through its model family's
`DecoderLayer` view (norms, the TP linears of the attention projections and the MLP, so tensor
parallelism is unchanged), with a masked `scaled_dot_product_attention` in place of the flash
varlen call. That allows:

- prefix trees: several token sequences sharing prefixes in one row, each token attending to its
  ancestors only, position ids = depth (a doc's context once for all its choices, a few-shot
  prefix once for several docs, several docs per row without padding between them);
- the same layer math for cached decoding (`decode_attention`).

Rotary math follows Nanotron's own (the layer's pair layout and RoPE base, fp32), so a row
computed here equals the same row through Nanotron's forward up to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lighteval_nanotron.models.engine.attention_pieces import AttentionPlan, attend, plan_attention
from lighteval_nanotron.models.families.base import DecoderLayer


def ancestor_mask(parents: torch.Tensor) -> torch.Tensor:
    """`[rows, n]` parent indices (a root or pad node is its own parent; parents precede their
    children) -> `[rows, n, n]` bool, True where key j is node i or one of its ancestors.
    Pointer doubling: log2(depth) gathers of the whole matrix."""
    rows, n = parents.shape
    allowed = torch.eye(n, dtype=torch.bool, device=parents.device).expand(rows, n, n).contiguous()
    jump = parents  # the ancestor 2**k steps up (saturating at the root)
    for _ in range(n):
        allowed = allowed | torch.gather(allowed, 1, jump[:, :, None].expand(rows, n, n))
        next_jump = torch.gather(jump, 1, jump)
        if torch.equal(next_jump, jump):
            break
        jump = next_jump
    return allowed


@dataclass
class PrefixKeys:
    """Keys and values of shared prefixes, computed once per evaluation (`capture` of a
    `TreeAttention`: per layer, every node of the prefix micro-batches, flattened), and the
    nodes one micro-batch reads: `index` `[context]` into them, with `allowed` `[rows, seq,
    context]` saying which of the batch's nodes see which prefix position."""

    store: dict[int, tuple[torch.Tensor, torch.Tensor]]
    index: torch.Tensor
    allowed: torch.Tensor

    def layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.store[layer]
        return keys.index_select(0, self.index), values.index_select(0, self.index)


@dataclass
class TreeAttention:
    """What one forward of packed prefix-tree rows needs besides the token ids: `positions`
    `[rows, seq]` (rotary position of each node) and `allowed` `[rows, seq, seq]` (which nodes
    each node sees). `prefix`: keys/values of shared prefixes that come before the row's own
    keys. `capture`: a dict that receives each layer's keys/values `[rows * seq, kv heads, dim]`
    (prefix forwards). `chunk_tokens`: the position-wise parts of a layer (norms, projections,
    rotary, MLP) run on about this many token positions at a time, so their intermediates stay
    in cache (None: the whole micro-batch at once). The attention plan
    (`attention_pieces.plan_attention`) and the rotary tables are built at the first layer and
    reused by the others."""

    positions: torch.Tensor
    allowed: torch.Tensor
    prefix: PrefixKeys | None = None
    capture: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None
    chunk_tokens: int | None = None
    _plan: AttentionPlan | None = field(default=None, init=False, repr=False)
    _tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict, init=False, repr=False)

    def run_layer(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        """One decoder layer on `[seq, rows, hidden]` (its submodules, masked attention)."""
        seq, rows, _ = hidden.shape
        step = seq if self.chunk_tokens is None else max(1, self.chunk_tokens // rows)
        spans = [(start, min(seq, start + step)) for start in range(0, seq, step)]
        q, k, v = self._projections(layer, hidden, spans)
        if self.capture is not None:
            self.capture[index] = (k.view(rows * seq, *k.shape[2:]), v.view(rows * seq, *v.shape[2:]))
        attended = self._attention(q, k, v, index).view(rows, seq, -1)
        out = torch.empty_like(hidden)
        for start, end in spans:
            residual = layer.attention_out(attended[:, start:end].transpose(0, 1)) + hidden[start:end]
            out[start:end] = layer.mlp(layer.mlp_norm(residual)) + residual
        return out

    def _projections(
        self, layer: DecoderLayer, hidden: torch.Tensor, spans: list[tuple[int, int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values `[rows, seq, heads, dim]`, rotated, computed span by span."""
        seq, rows, _ = hidden.shape
        dim = layer.head_dim
        q = hidden.new_empty(rows, seq, layer.q_heads, dim)
        k = hidden.new_empty(rows, seq, layer.kv_heads, dim)
        v = hidden.new_empty(rows, seq, layer.kv_heads, dim)
        for start, end in spans:
            parts = layer.qkv(layer.attention_norm(hidden[start:end]))
            pq, pk, pv = (t.transpose(0, 1).unflatten(-1, (-1, dim)) for t in parts)
            if layer.rotary is not None:
                cos, sin = self._rotary(dim, layer.rotary.base, hidden.dtype)
                cos, sin = cos[:, start:end], sin[:, start:end]
                pq = apply_rotary(pq, cos, sin, layer.rotary.interleaved)
                pk = apply_rotary(pk, cos, sin, layer.rotary.interleaved)
            q[:, start:end], k[:, start:end], v[:, start:end] = pq, pk, pv
        return q, k, v

    def _rotary(self, dim: int, base: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        key = (dim, float(base), dtype)
        if key not in self._tables:
            self._tables[key] = rotary_tables(self.positions, dim, base, self.positions.device, dtype)
        return self._tables[key]

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index: int) -> torch.Tensor:
        rows, seq = q.shape[:2]
        keys, values = k.view(rows * seq, *k.shape[2:]), v.view(rows * seq, *v.shape[2:])
        if self.prefix is not None:  # the prefix positions first, then the rows' own nodes
            prefix_keys, prefix_values = self.prefix.layer(index)
            keys, values = torch.cat((prefix_keys, keys)), torch.cat((prefix_values, values))
        if self._plan is None:
            self._plan = plan_attention(self.allowed, None if self.prefix is None else self.prefix.allowed)
        compute = torch.float32 if q.device.type == "cpu" else q.dtype
        return attend(self._plan, q.view(rows * seq, *q.shape[2:]), keys, values, compute)


def rotary_tables(
    positions: torch.Tensor, dim: int, base: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `[rows, seq, 1, dim / 2]` of `positions` (rounded through `dtype`, as Nanotron)."""
    inv_freq = 1.0 / (float(base) ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    freqs = positions.to(device=device, dtype=torch.float32)[..., None] * inv_freq
    return torch.cos(freqs).to(dtype).float()[:, :, None, :], torch.sin(freqs).to(dtype).float()[:, :, None, :]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    xf = x.float()
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    else:
        x1, x2 = xf.chunk(2, dim=-1)
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.to(x.dtype)
