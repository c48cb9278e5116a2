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
import torch.nn.functional as F

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


ATTENTION_BLOCK = 128
"""Queries per block of the block-sparse attention over long packed rows (`TreeAttention`)."""


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
    """What one forward needs besides the token ids: `positions` `[rows, seq]` (rotary position of
    each token) and `allowed` `[rows, seq, seq]` (which tokens each token sees).
    `prefix`: keys/values of shared prefixes that come before the row's own keys. `capture`: a
    dict that receives each layer's keys/values `[rows * new, kv heads, dim]` (prefix forwards)."""

    positions: torch.Tensor
    allowed: torch.Tensor
    prefix: PrefixKeys | None = None
    capture: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None
    _block_plan: list[tuple[int, int, int, int, bool]] | None = field(default=None, init=False, repr=False)
    _mask_cache: list[torch.Tensor] | None = field(default=None, init=False, repr=False)

    def run_layer(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        """One decoder layer on `[seq, rows, hidden]` (its submodules, masked attention)."""
        residual = hidden
        hidden = self._attention(layer, layer.attention_norm(hidden), index) + residual
        residual = hidden
        return layer.mlp(layer.mlp_norm(hidden)) + residual

    def _attention(self, layer: DecoderLayer, hidden: torch.Tensor, index: int) -> torch.Tensor:
        projected = layer.qkv(hidden)  # [seq, rows, heads * dim] each (the full sequence under any TP mode)
        seq, rows, _ = projected[0].shape
        nq, dim = layer.q_heads, layer.head_dim
        q, k, v = (t.transpose(0, 1).reshape(rows, seq, -1, dim) for t in projected)
        if layer.rotary is not None:
            q = rotate(q, self.positions, layer.rotary.base, layer.rotary.interleaved)
            k = rotate(k, self.positions, layer.rotary.base, layer.rotary.interleaved)
        if self.capture is not None:
            self.capture[index] = (k.reshape(rows * seq, *k.shape[2:]), v.reshape(rows * seq, *v.shape[2:]))
        compute = torch.float32 if q.device.type == "cpu" else q.dtype
        repeat = nq // layer.kv_heads
        q = q.transpose(1, 2).to(compute)
        k = k.transpose(1, 2).to(compute).repeat_interleave(repeat, dim=1)
        v = v.transpose(1, 2).to(compute).repeat_interleave(repeat, dim=1)
        context = 0
        if self.prefix is not None:  # the prefix's keys first, the same for every row
            pk, pv = self.prefix.layer(index)
            context = pk.shape[0]
            pk, pv = (t.transpose(0, 1).to(compute).repeat_interleave(repeat, dim=0) for t in (pk, pv))
            k = torch.cat((pk[None].expand(rows, -1, -1, -1), k), dim=2)
            v = torch.cat((pv[None].expand(rows, -1, -1, -1), v), dim=2)
        blocks = self._blocks()
        masks = self._masks(compute)
        if blocks is None:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=masks[0])
        else:
            out = q.new_empty(q.shape)
            for (r, start, end, lo, reads_prefix), mask in zip(blocks, masks):
                rows_ = slice(r, r + 1)
                keys = slice(context + lo, context + end)
                bk, bv = k[rows_, :, keys], v[rows_, :, keys]
                if reads_prefix:
                    bk = torch.cat((k[rows_, :, :context], bk), dim=2)
                    bv = torch.cat((v[rows_, :, :context], bv), dim=2)
                out[rows_, :, start:end] = F.scaled_dot_product_attention(
                    q[rows_, :, start:end], bk, bv, attn_mask=mask
                )
        out = out.to(hidden.dtype).transpose(1, 2).reshape(rows, seq, nq * dim).transpose(0, 1)
        return layer.attention_out(out)

    def _masks(self, dtype: torch.dtype) -> list[torch.Tensor]:
        """Additive masks (0 where allowed, -inf elsewhere) of the dense call or of each block,
        `[rows, 1, queries, keys]`, built at the first layer and reused by every other one
        (SDPA turns a boolean mask into this at every call)."""
        if self._mask_cache is not None:
            return self._mask_cache
        blocks = self._blocks()
        if blocks is None:
            bools = [self.allowed if self.prefix is None else torch.cat((self.prefix.allowed, self.allowed), dim=-1)]
        else:
            bools = []
            for r, start, end, lo, reads_prefix in blocks:
                mask = self.allowed[r : r + 1, start:end, lo:end]
                if reads_prefix:
                    mask = torch.cat((self.prefix.allowed[r : r + 1, start:end], mask), dim=-1)
                bools.append(mask)
        self._mask_cache = [
            torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill_(~m, float("-inf"))[:, None] for m in bools
        ]
        return self._mask_cache

    def _blocks(self) -> list[tuple[int, int, int, int, bool]] | None:
        """Block-sparse plan for long rows whose queries are the keys themselves (packed trees,
        prefill): `(row, start, end, first key, reads the prefix)` per row and block of
        `ATTENTION_BLOCK` queries. A node only sees itself and earlier nodes, so keys after the
        block's last query and before its first needed key are skipped (they are masked out: the
        result is the same); per row, so one row whose block looks far back (a long in-row
        prefix) does not make the others do so. None: one dense call (short rows, decode steps)."""
        if self._block_plan is not None:
            return self._block_plan or None
        rows, seq, keys = self.allowed.shape
        if keys != seq or seq <= 2 * ATTENTION_BLOCK:
            self._block_plan = []
            return None
        first = self.allowed.to(torch.uint8).argmax(dim=-1).cpu()  # [rows, seq] first visible own key per query
        seen = self.prefix.allowed.any(dim=-1).cpu() if self.prefix is not None else None  # [rows, seq]
        plan = []
        for start in range(0, seq, ATTENTION_BLOCK):
            end = min(seq, start + ATTENTION_BLOCK)
            los = first[:, start:end].min(dim=-1).values.tolist()
            reads = seen[:, start:end].any(dim=-1).tolist() if seen is not None else [False] * rows
            plan += [(r, start, end, lo, read) for r, (lo, read) in enumerate(zip(los, reads))]
        self._block_plan = sorted(plan)
        return self._block_plan


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float, interleaved: bool) -> torch.Tensor:
    """Rotary embedding of `x` `[rows, seq, heads, dim]` at `positions` `[rows, seq]`, fp32 math."""
    cos, sin = rotary_tables(positions, x.shape[-1], base, x.device, x.dtype)
    return apply_rotary(x, cos, sin, interleaved)


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
