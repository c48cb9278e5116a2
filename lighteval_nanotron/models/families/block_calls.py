"""How a family's chain calls the modules of Nanotron's `PipelineBlock`s that several families
share: each takes `(module, hidden, mask)` and returns the block's tensor (see `ChainBlock.run`).

The `*_with_mask` calls are for Nanotron 0.4's layout (`[seq, batch, hidden]` with a mask), which
Llama and Starcoder2 use; Qwen2 has its own embedding and layer calls (`families/qwen2/family.py`).
"""

from __future__ import annotations

from typing import Any

import torch


def embed_with_mask(module: Any, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(input_ids=input_ids, input_mask=mask)["input_embeds"]


def layer_with_mask(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(hidden_states=hidden, sequence_mask=mask)["hidden_states"]


def norm(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return module(input=hidden)


def linear(module: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A TP linear (the lm_head) or the fp32 cast."""
    return module(x=hidden)
