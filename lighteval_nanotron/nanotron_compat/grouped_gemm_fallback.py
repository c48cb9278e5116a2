"""A PyTorch stand-in for `grouped_gemm` (github.com/fanshiqing/grouped_gemm), for CPU machines.

Current Nanotron (GitHub main) imports `grouped_gemm.ops` at module level in `nn/moe.py` (raising
without it), and `scaling/parametrization.py` imports that module for every model, Llama included;
grouped_gemm is a CUDA extension. The stand-in provides `grouped_gemm.ops` with the real API and
semantics, differentiable through autograd:

- `gmm(a, b, batch_sizes, trans_b=False)`: rows of `a` in consecutive groups of `batch_sizes`
  (on the CPU, as the real op asks), group i multiplied by `b[i]` (`b[i].T` with `trans_b`);
- `permute(input, indices, num_out_tokens=None, max_token_num=0)`: token copies sorted by expert
  (stable, as the real op's radix sort), with `row_id_map[k * num_tokens + t]` = the row of
  token t's k-th copy (-1 past `num_out_tokens`);
- `unpermute(input, row_id_map, probs=None)`: each token's copies summed back, weighted by
  `probs [num_tokens, topk]` (in fp32, cast back to the input dtype).

Installed under the same policy as the flash-attn stand-in (`stand_ins`): never over a real
grouped_gemm, on machines without CUDA, on a CUDA machine only when asked for
(`LIGHTEVAL_NANOTRON_GROUPED_GEMM_FALLBACK=1`). `sinkhorn_kernel` is not provided.
"""

from __future__ import annotations

import logging
from typing import Optional, Tuple

import torch

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.nanotron_compat.stand_ins import (
    allowed_here,
    announce,
    is_stand_in,
    real_package_available,
    register_stand_in,
)

ALLOW_ON_GPU_ENV = "LIGHTEVAL_NANOTRON_GROUPED_GEMM_FALLBACK"
"""Set to 1 to use the stand-in on a CUDA machine without grouped_gemm."""

logger = logging.getLogger(__name__)


def gmm(a: torch.Tensor, b: torch.Tensor, batch_sizes: torch.Tensor, trans_b: bool = False) -> torch.Tensor:
    """Grouped matmul: a [sum(batch_sizes), K], b [E, K, N] (or [E, N, K] with trans_b) -> [rows, N]."""
    if batch_sizes.ndim != 1 or batch_sizes.shape[0] != b.shape[0]:
        raise ValueError(
            f"batch_sizes must be 1-d with one entry per group ({b.shape[0]}), got {tuple(batch_sizes.shape)}"
        )
    sizes = [int(size) for size in batch_sizes.tolist()]
    if sum(sizes) != a.shape[0]:
        raise ValueError(f"batch_sizes sum to {sum(sizes)} but a has {a.shape[0]} rows")
    if not any(sizes):
        raise ValueError("Input batch_sizes should not be all zeros!")
    weights = b.transpose(1, 2) if trans_b else b
    groups = torch.split(a, sizes, dim=0)
    return torch.cat([group @ weights[i] for i, group in enumerate(groups)], dim=0)


def permute(
    input_act: torch.Tensor, indices: torch.Tensor, num_out_tokens: Optional[int] = None, max_token_num: int = 0
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(copies of the tokens sorted by expert [num_out_tokens, hidden], row_id_map [topk * num_tokens] int32)."""
    if indices.dim() == 1:
        indices = indices.view(-1, 1)
    if input_act.shape[0] != indices.shape[0]:
        raise RuntimeError(f"permute: indices have {indices.shape[0]} rows, the input {input_act.shape[0]} tokens")
    num_tokens, topk = indices.shape
    total = num_tokens * topk
    kept = total if not num_out_tokens else min(int(num_out_tokens), total)
    sorted_rows = torch.argsort(indices.reshape(-1).to(torch.int64), stable=True)  # rows are t * topk + k
    permuted = input_act.index_select(0, sorted_rows[:kept] // topk)
    destination = torch.arange(total, dtype=torch.int32, device=indices.device)
    destination = destination.masked_fill(destination >= kept, -1)
    by_row = torch.empty(total, dtype=torch.int32, device=indices.device)
    by_row[sorted_rows] = destination  # destination of row t * topk + k
    row_id_map = by_row.view(num_tokens, topk).t().reshape(-1).contiguous()  # [k * num_tokens + t]
    return permuted, row_id_map


def unpermute(input_act: torch.Tensor, row_id_map: torch.Tensor, probs: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Token t = sum over k of input_act[row_id_map[k * num_tokens + t]] * probs[t, k] (rows -1 skipped)."""
    num_tokens = probs.shape[0] if probs is not None else input_act.shape[0]
    topk = probs.shape[1] if probs is not None else 1
    if row_id_map.numel() != num_tokens * topk:
        raise RuntimeError(f"unpermute: row_id_map has {row_id_map.numel()} entries, expected {num_tokens * topk}")
    rows = row_id_map.to(torch.int64).view(topk, num_tokens).t()  # [num_tokens, topk]
    present = rows >= 0
    gathered = input_act.float()[rows.clamp(min=0)] * present[..., None]  # [num_tokens, topk, hidden]
    if probs is not None:
        gathered = gathered * probs.float()[..., None]
    return gathered.sum(dim=1).to(input_act.dtype)


def is_grouped_gemm_fallback_installed() -> bool:
    """True when `grouped_gemm` in `sys.modules` is this stand-in."""
    return is_stand_in("grouped_gemm")


def install_grouped_gemm_fallback(force: bool = False, allow_on_gpu: bool | None = None) -> bool:
    """Register the stand-in as `grouped_gemm` / `grouped_gemm.ops` where the policy allows it;
    idempotent. Returns True when the stand-in is active (`force`: even over a real one)."""
    if is_grouped_gemm_fallback_installed():
        return True
    if force:
        reason = "asked for (CPU support enabled)"
    else:
        if real_package_available("grouped_gemm"):
            return False
        allowed, reason = allowed_here(allow_on_gpu, ALLOW_ON_GPU_ENV)
        if not allowed:
            return False
    ops = {"gmm": gmm, "permute": permute, "unpermute": unpermute}
    register_stand_in("grouped_gemm", {"grouped_gemm": {}, "grouped_gemm.ops": ops}, __doc__)
    announce(logger, "grouped_gemm stand-in in use (%s): MoE experts run on plain PyTorch matmuls.", reason)
    return True


def ensure_grouped_gemm(allow_on_gpu: bool | None = None) -> str:
    """Make `import grouped_gemm.ops` work: "grouped_gemm" (the real one), "stand-in"; ConfigError
    on a CUDA machine without grouped_gemm unless the stand-in is asked for."""
    if install_grouped_gemm_fallback(allow_on_gpu=allow_on_gpu):
        return "stand-in"
    if real_package_available("grouped_gemm"):
        return "grouped_gemm"
    raise ConfigError(
        "grouped_gemm is not installed on this CUDA machine and current Nanotron imports it for every model "
        "(nanotron/nn/moe.py names the install command), or set "
        f"{ALLOW_ON_GPU_ENV}=1 to run MoE experts on plain PyTorch matmuls instead."
    )
