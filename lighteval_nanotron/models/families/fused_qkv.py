"""The decoder-layer view Llama and Qwen2 share: `input_layernorm`, one fused `qkv_proj` linear
(all this TP rank's query heads, then its key heads, then its value heads), `o_proj`,
`post_attention_layernorm`. A family's subclass gives the head layout, the rotary and the MLP."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from lighteval_nanotron.models.families.base import DecoderLayer, Rotary


class FusedQkvLayer(DecoderLayer):
    def __init__(self, module: Any, q_heads: int, kv_heads: int, head_dim: int, rotary: Rotary | None):
        self._module, self._attn = module, module.attn
        self.q_heads, self.kv_heads, self.head_dim, self.rotary = q_heads, kv_heads, head_dim, rotary

    def attention_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.input_layernorm(hidden)

    def qkv(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q_size, kv_size = self.q_heads * self.head_dim, self.kv_heads * self.head_dim
        return torch.split(self._attn.qkv_proj(hidden), [q_size, kv_size, kv_size], dim=-1)

    def attention_out(self, attended: torch.Tensor) -> torch.Tensor:
        return self._attn.o_proj(attended)

    def mlp_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._module.post_attention_layernorm(hidden)

    @abstractmethod
    def mlp(self, hidden: torch.Tensor) -> torch.Tensor: ...
