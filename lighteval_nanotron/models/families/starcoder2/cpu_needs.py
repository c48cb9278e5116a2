"""What Nanotron's Starcoder2 needs to run on CPU with gloo (`enable_cpu_support()` applies it;
docs/cpu.md): its pipeline P2P becomes the gloo-safe `CpuP2P`, and `StarcoderRotaryEmbedding`
computes its inverse frequencies on the CPU (`starcoder2.py:123-138` makes them on "cuda")."""

from __future__ import annotations

from typing import Any

import torch

from lighteval_nanotron.models.families.base import CpuNeeds


def cpu_needs() -> CpuNeeds:
    from nanotron.models import starcoder2

    return CpuNeeds(
        p2p_modules=(starcoder2,),
        replaced=((starcoder2.StarcoderRotaryEmbedding, "init_rotary_embeddings", _init_starcoder_rotary_cpu),),
    )


def _init_starcoder_rotary_cpu(self: Any) -> None:
    """starcoder2.StarcoderRotaryEmbedding.init_rotary_embeddings (starcoder2.py:123-138) on the CPU."""
    if self._initialized_buffer:
        return
    self.inv_freq = 1.0 / (self.base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
    self._initialized_buffer = True
