"""How much memory a micro-batch may take, and what a failed allocation turns into.

At each run of a plan the engine sizes its micro-batches by a token budget: `tokens_per_batch`,
lowered to what `memory_budget_gb` and, on CUDA, the memory free at that moment (less
`CUDA_KEPT_FOR_TRAINING`) hold at `token_bytes` per token; the minimum over every rank of the world,
so every rank cuts the same batches. An allocation that fails anyway on some rank (an estimate is
an estimate) is agreed on by every rank (`oom_failure`) and answered by a smaller budget.
"""

from __future__ import annotations

import gc
import resource
from typing import Any, Optional

import torch

from lighteval_nanotron.errors import EvaluationError
from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.parallel.agreement import Verdict, default_failure

CUDA_KEPT_FOR_TRAINING = 0.2
"""Share of the CUDA memory free at an evaluation's start that its micro-batches leave alone
(fragmentation, and what the training allocates again right after)."""

GIB = 2**30
UNKNOWN = 2**62
"""Free bytes of a rank that cannot tell (larger than any real amount, so a minimum ignores it)."""


class OutOfMemoryEverywhere(EvaluationError):
    """Every failure of a run was a failed allocation; every rank raises it together, so all of
    them can retry the plan with smaller micro-batches."""


def oom_failure(what: str, verdict: Verdict, error: Optional[BaseException]) -> BaseException:
    """`collectively`'s failure: `OutOfMemoryEverywhere` when every failing rank ran out of memory."""
    if verdict.out_of_memory:
        return OutOfMemoryEverywhere(f"{what}: out of memory ({verdict.describe()})")
    return default_failure(what, verdict, error)


def token_bytes(model_config: Any, tp_size: int, dtype: torch.dtype, cfg: EngineConfig) -> int:
    """Bytes one token of a micro-batch may take at once on a rank, an upper estimate: the residual
    stream, norm and projections (4 x hidden), the MLP's gate, up and activation (3 x its width per
    TP rank), and the attention's float32 scores and mask against up to `pack_width` keys per head."""
    hidden = int(model_config.hidden_size)
    mlp = int(getattr(model_config, "intermediate_size", None) or 4 * hidden)
    heads = max(1, int(getattr(model_config, "num_attention_heads", 1)) // tp_size)
    element = torch.finfo(dtype).bits // 8 if dtype.is_floating_point else 4
    return element * (4 * hidden + 3 * mlp // tp_size) + 2 * 4 * heads * cfg.pack_width


def free_bytes(device: torch.device) -> int | None:
    """Memory an evaluation could take now. CUDA: free on the device plus what PyTorch's allocator
    holds unused. CPU: the kernel's `MemAvailable`, and the address-space limit (`ulimit -v`) less
    what the process maps; None when neither is known."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    known = [value for value in (_meminfo_available(), _address_space_left()) if value is not None]
    return min(known) if known else None


def memory_tokens(cfg: EngineConfig, device: torch.device, per_token: int) -> tuple[int, int, int]:
    """This rank's (token budget, `memory_budget_gb` in bytes or `UNKNOWN`, free bytes or
    `UNKNOWN`): `tokens_per_batch`, lowered by `memory_budget_gb` and, on CUDA, by the free memory
    less `CUDA_KEPT_FOR_TRAINING`."""
    free = free_bytes(device)
    budget = UNKNOWN if cfg.memory_budget_gb is None else int(cfg.memory_budget_gb * GIB)
    tokens = min(cfg.tokens_per_batch, budget // per_token)
    if device.type == "cuda" and free is not None:
        tokens = min(tokens, int(free * (1 - CUDA_KEPT_FOR_TRAINING)) // per_token)
    return max(1, tokens), budget, UNKNOWN if free is None else free


def release(device: torch.device) -> None:
    """Give back what a failed run left: unreachable tensors collected, CUDA's cache emptied."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def describe_bytes(value: int) -> str:
    """`value` bytes in GiB, MiB or KiB (whichever shows it above 1)."""
    for unit, size in (("GiB", GIB), ("MiB", 2**20)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value / 1024:.2f} KiB"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _address_space_left() -> int | None:
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return max(0, limit - int(line.split()[1]) * 1024)
    except OSError:
        return None
    return None
