"""The rotary part of the CPU flash-attn stand-in (`flash_attn.layers.rotary`), in plain PyTorch.

`RotaryEmbedding` keeps flash-attn's attributes and cache (`inv_freq`, `_compute_inv_freq`,
`_update_cos_sin_cache`, `_cos_cached` / `_sin_cached`, `_seq_len_cached`), because current
Nanotron subclasses it (`nanotron/nn/rotary.py`, `FlashRotaryEmbedding`, which overrides the cache
update). `apply_rotary_emb` follows flash-attn's function: cos/sin `[seqlen, rotary_dim / 2]`, only
the first `rotary_dim` features rotated, per-sequence offsets, packed sequences via `cu_seqlens`,
math in fp32 from cos/sin in the input dtype (as flash-attn's kernel). Unlike flash-attn, the
module's forward returns new tensors instead of rotating its inputs in place.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import nn


def _unsupported(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"The CPU flash-attn fallback does not support {name}; install the real flash-attn on a GPU to use it."
    )


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """x [..., L, H, D]; cos/sin broadcastable to [..., L, D/2]; math in fp32, result in x's dtype."""
    xf = x.float()
    cos, sin = cos.float().unsqueeze(-2), sin.float().unsqueeze(-2)
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    else:
        x1, x2 = xf.chunk(2, dim=-1)
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.to(x.dtype)


def _rotate_part(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Rotate the first 2 * cos.shape[-1] features of x, pass the rest through."""
    rotary_dim = 2 * cos.shape[-1]
    if rotary_dim > x.shape[-1]:
        raise ValueError(f"rotary dim {rotary_dim} exceeds the head dim {x.shape[-1]}")
    if rotary_dim == x.shape[-1]:
        return _rotate(x, cos, sin, interleaved)
    return torch.cat((_rotate(x[..., :rotary_dim], cos, sin, interleaved), x[..., rotary_dim:]), dim=-1)


def _positions(lengths: list[int], offsets: Union[int, torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Position indices of each sequence: arange(length) + its offset."""
    if isinstance(offsets, torch.Tensor):
        starts = offsets.to(device=device, dtype=torch.long).reshape(-1).tolist()
        if len(starts) == 1:
            starts = starts * len(lengths)
    else:
        starts = [int(offsets)] * len(lengths)
    return [torch.arange(length, device=device) + start for length, start in zip(lengths, starts)]


def apply_rotary_emb(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    interleaved: bool = False,
    inplace: bool = False,
    seqlen_offsets: Union[int, torch.Tensor] = 0,
    cu_seqlens: Optional[torch.Tensor] = None,
    max_seqlen: Optional[int] = None,
) -> torch.Tensor:
    """flash_attn.layers.rotary.apply_rotary_emb: x [B, L, H, D] (or packed [total, H, D] with
    `cu_seqlens`); row t of sequence b uses cos/sin row t + seqlen_offsets[b]."""
    if cu_seqlens is None:
        batch, length = x.shape[0], x.shape[1]
        rows = torch.stack(_positions([length] * batch, seqlen_offsets, x.device))  # [B, L]
        out = _rotate_part(x, cos[rows], sin[rows], interleaved)
    else:
        bounds = cu_seqlens.tolist()
        lengths = [end - start for start, end in zip(bounds[:-1], bounds[1:])]
        rows = torch.cat(_positions(lengths, seqlen_offsets, x.device))  # [total]
        out = _rotate_part(x[: bounds[-1]], cos[rows], sin[rows], interleaved)
        if bounds[-1] < x.shape[0]:
            out = torch.cat((out, x[bounds[-1] :]), dim=0)
    if inplace:
        x.copy_(out)
        return x
    return out


class RotaryEmbedding(nn.Module):
    """flash_attn.layers.rotary.RotaryEmbedding: rotary position embedding applied to q and k.

    `forward(qkv)` takes [B, L, 3, H, D]; `forward(q, kv=kv)` takes q [B, L, H, D] and
    kv [B, L, 2, Hk, D] and returns (q, kv).
    """

    def __init__(
        self,
        dim: int,
        base: float = 10000.0,
        interleaved: bool = False,
        scale_base: Optional[float] = None,
        pos_idx_in_fp32: bool = True,
        device: Optional[torch.device] = None,
    ):
        super().__init__()
        if scale_base is not None:
            raise _unsupported("scale_base (xPos)")
        self.dim = dim
        self.base = float(base)
        self.pos_idx_in_fp32 = pos_idx_in_fp32
        self.register_buffer("inv_freq", self._compute_inv_freq(device), persistent=False)
        self.interleaved = interleaved
        self.scale_base = scale_base
        self.register_buffer("scale", None, persistent=False)
        self._seq_len_cached = 0
        self._cos_cached: Optional[torch.Tensor] = None
        self._sin_cached: Optional[torch.Tensor] = None
        self._cos_k_cached: Optional[torch.Tensor] = None
        self._sin_k_cached: Optional[torch.Tensor] = None

    def _compute_inv_freq(self, device: Optional[torch.device] = None) -> torch.Tensor:
        return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))

    def _update_cos_sin_cache(
        self, seqlen: int, device: Optional[torch.device] = None, dtype: Optional[torch.dtype] = None
    ) -> None:
        """cos/sin of positions [0, seqlen) in `dtype`, recomputed when longer, moved or retyped."""
        if (
            seqlen > self._seq_len_cached
            or self._cos_cached is None
            or self._cos_cached.device != device
            or self._cos_cached.dtype != dtype
            or (self.training and self._cos_cached.is_inference())
        ):
            self._seq_len_cached = seqlen
            inv_freq = self.inv_freq if self.inv_freq.dtype == torch.float32 else self._compute_inv_freq(device)
            position_dtype = torch.float32 if self.pos_idx_in_fp32 else self.inv_freq.dtype
            positions = torch.arange(seqlen, device=device, dtype=position_dtype)
            freqs = torch.outer(positions, inv_freq.to(device=device, dtype=position_dtype))
            self._cos_cached = torch.cos(freqs).to(dtype)
            self._sin_cached = torch.sin(freqs).to(dtype)

    def _cache_for(self, length: int, seqlen_offset: Union[int, torch.Tensor], max_seqlen: Optional[int], x) -> None:
        if max_seqlen is not None:
            needed = max_seqlen
        elif isinstance(seqlen_offset, int):
            needed = length + seqlen_offset
        else:  # flash-attn asks for max_seqlen here; the largest offset is enough to size the cache
            needed = length + int(seqlen_offset.max().item())
        self._update_cos_sin_cache(max(needed, length), device=x.device, dtype=x.dtype)

    def forward(
        self,
        qkv: torch.Tensor,
        kv: Optional[torch.Tensor] = None,
        seqlen_offset: Union[int, torch.Tensor] = 0,
        max_seqlen: Optional[int] = None,
        num_heads_q: Optional[int] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        if num_heads_q is not None:
            raise _unsupported("num_heads_q (packed GQA qkv)")
        self._cache_for(qkv.shape[1], seqlen_offset, max_seqlen, qkv)
        cos, sin = self._cos_cached, self._sin_cached

        def rotate(x: torch.Tensor) -> torch.Tensor:
            return apply_rotary_emb(x, cos, sin, interleaved=self.interleaved, seqlen_offsets=seqlen_offset)

        if kv is None:
            return torch.stack((rotate(qkv[:, :, 0]), rotate(qkv[:, :, 1]), qkv[:, :, 2]), dim=2)
        return rotate(qkv), torch.stack((rotate(kv[:, :, 0]), kv[:, :, 1]), dim=2)
