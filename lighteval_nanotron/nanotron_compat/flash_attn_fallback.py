"""A PyTorch stand-in for the parts of `flash_attn` that Nanotron imports, for CPU machines.

Nanotron 0.4 (`models/llama.py:20-25`, `nn/layer_norm.py:2`) and current Nanotron (GitHub main:
also `nn/attention.py`, `nn/rotary.py`, `nn/ring_attention.py`, `models/qwen.py`) import
flash-attn at module level; flash-attn cannot be installed without CUDA.
`install_flash_attn_fallback` registers plain-PyTorch functions under flash-attn's module names in
`sys.modules`, so the models import and run on CPU: attention (`flash_attn_attention`: varlen,
padded, kv-packed, KV-cache and the low-level forward/backward with log-sum-exp), rotary
(`flash_attn_rotary`), and here `bert_padding` and the fused (RMS) layer norm. It reports
`__version__` "2.6.3", the release whose API it follows (current Nanotron pins flash-attn <2.7).

When it is installed (`install_flash_attn_fallback`, `ensure_flash_attn`; policy in `stand_ins`):
- a real flash-attn that can be imported is never replaced (except by `force=True`, which
  `enable_cpu_support()` passes: flash-attn kernels cannot take CPU tensors);
- on a machine without CUDA, where flash-attn is missing;
- on a CUDA machine without flash-attn only when asked for (`allow_on_gpu=True` or
  `LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK=1`): training there should use the real kernels.
It says so once in the log (a warning) when it is installed.

Not supported (raise `NotImplementedError`): dropout, ALiBi, softcap, paged or indexed KV caches,
rotary inside `flash_attn_with_kvcache`, xPos rotary scaling, returned attention probabilities.
"""

import logging
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.nanotron_compat.flash_attn_attention import (
    _flash_attn_varlen_backward,
    _flash_attn_varlen_forward,
    _unsupported,
    flash_attn_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_with_kvcache,
)
from lighteval_nanotron.nanotron_compat.flash_attn_rotary import RotaryEmbedding, apply_rotary_emb
from lighteval_nanotron.nanotron_compat.stand_ins import (
    FALLBACK_MARKER,
    allowed_here,
    announce,
    is_stand_in,
    real_package_available,
    register_stand_in,
)

ALLOW_ON_GPU_ENV = "LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK"
"""Set to 1 to use the stand-in on a CUDA machine without flash-attn."""
VERSION = "2.6.3"
"""The flash-attn release whose API the stand-in follows (reported as `flash_attn.__version__`)."""

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- bert_padding


def unpad_input(
    hidden_states: torch.Tensor, attention_mask: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """[batch, seq, ...] + bool mask -> (rows where mask is true, their flat indices, cu_seqlens, max seqlen)."""
    seqlens = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    rows = hidden_states.reshape(-1, *hidden_states.shape[2:])[indices]
    return rows, indices, cu_seqlens, int(seqlens.max().item())


def pad_input(hidden_states: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int) -> torch.Tensor:
    """Inverse of `unpad_input`: scatter rows back into a zero [batch, seqlen, ...] tensor."""
    out = hidden_states.new_zeros(batch * seqlen, *hidden_states.shape[1:])
    out[indices] = hidden_states
    return out.view(batch, seqlen, *hidden_states.shape[1:])


# ---------------------------------------------------------------- layer norm


def layer_norm_fn(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    residual: Optional[torch.Tensor] = None,
    x1: Optional[torch.Tensor] = None,
    weight1: Optional[torch.Tensor] = None,
    bias1: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
    dropout_p: float = 0.0,
    rowscale: Optional[torch.Tensor] = None,
    prenorm: bool = False,
    residual_in_fp32: bool = False,
    zero_centered_weight: bool = False,
    is_rms_norm: bool = False,
    return_dropout_mask: bool = False,
    out_dtype: Optional[torch.dtype] = None,
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """LayerNorm / RMSNorm over the last dim in fp32, with an optional residual added first.

    Returns the normalised tensor (in `out_dtype`, default x's dtype), and with `prenorm` also the
    pre-normalisation sum (fp32 if `residual_in_fp32`)."""
    if dropout_p or return_dropout_mask:
        raise _unsupported("dropout in layer_norm_fn")
    for name, value in (("x1", x1), ("weight1", weight1), ("bias1", bias1), ("rowscale", rowscale)):
        if value is not None:
            raise _unsupported(name)
    if zero_centered_weight:
        raise _unsupported("zero_centered_weight")
    hidden = x.float()
    if residual is not None:
        hidden = hidden + residual.float()
    if is_rms_norm:
        normed = hidden * torch.rsqrt(hidden.pow(2).mean(dim=-1, keepdim=True) + eps)
    else:
        centered = hidden - hidden.mean(dim=-1, keepdim=True)
        normed = centered * torch.rsqrt(centered.pow(2).mean(dim=-1, keepdim=True) + eps)
    out = normed * weight.float()
    if bias is not None:
        out = out + bias.float()
    out = out.to(out_dtype if out_dtype is not None else x.dtype)
    if not prenorm:
        return out
    residual_dtype = torch.float32 if residual_in_fp32 else (residual.dtype if residual is not None else x.dtype)
    return out, hidden.to(residual_dtype)


# ---------------------------------------------------------------- registration


def is_fallback_installed() -> bool:
    """True when `flash_attn` in `sys.modules` is this fallback."""
    return is_stand_in("flash_attn")


def install_flash_attn_fallback(force: bool = False, allow_on_gpu: bool | None = None) -> bool:
    """Register the stand-in under flash-attn's module names where the policy of the module
    docstring allows it; idempotent. Returns True when the stand-in is active.

    A real flash-attn that is installed is left in place (returns False) unless `force` (what
    `enable_cpu_support` does: flash-attn kernels cannot take CPU tensors); then the stand-in
    replaces it, also in `nanotron` modules that were already imported. `allow_on_gpu` (default:
    `LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK=1`): install it on a CUDA machine without flash-attn too.
    """
    if is_fallback_installed():
        return True
    if force:
        reason = "asked for (CPU support enabled)"
    else:
        if real_package_available("flash_attn"):
            return False
        allowed, reason = allowed_here(allow_on_gpu, ALLOW_ON_GPU_ENV)
        if not allowed:
            return False
    _register()
    announce(
        logger,
        "flash-attn stand-in in use (%s): Nanotron's attention runs on scaled_dot_product_attention, "
        "rotary and RMSNorm on plain PyTorch (lighteval_nanotron.nanotron_compat.flash_attn_fallback).",
        reason,
    )
    return True


def ensure_flash_attn(allow_on_gpu: bool | None = None) -> str:
    """Make `import flash_attn` work before Nanotron's models are imported: "flash-attn" when the
    real one is installed, "stand-in" when the stand-in is (now) active. Raises ConfigError on a
    CUDA machine without flash-attn unless the stand-in is asked for."""
    if install_flash_attn_fallback(allow_on_gpu=allow_on_gpu):
        return "stand-in"
    if real_package_available("flash_attn"):
        return "flash-attn"
    raise ConfigError(
        "flash-attn is not installed on this CUDA machine and Nanotron's models need it: install it "
        f"(pip install flash-attn), or set {ALLOW_ON_GPU_ENV}=1 to run attention on PyTorch's "
        "scaled_dot_product_attention instead."
    )


def _register() -> None:
    attention = {
        "flash_attn_func": flash_attn_func,
        "flash_attn_varlen_func": flash_attn_varlen_func,
        "flash_attn_varlen_kvpacked_func": flash_attn_varlen_kvpacked_func,
        "flash_attn_with_kvcache": flash_attn_with_kvcache,
    }
    low_level = {"_flash_attn_varlen_forward": _flash_attn_varlen_forward,
                 "_flash_attn_varlen_backward": _flash_attn_varlen_backward}  # fmt: skip
    contents = {
        "flash_attn": {**attention, "__version__": VERSION},
        "flash_attn.bert_padding": {"unpad_input": unpad_input, "pad_input": pad_input},
        "flash_attn.flash_attn_interface": {**attention, **low_level},
        "flash_attn.layers": {},
        "flash_attn.layers.rotary": {"RotaryEmbedding": RotaryEmbedding, "apply_rotary_emb": apply_rotary_emb},
        "flash_attn.modules": {},
        "flash_attn.modules.mha": {"flash_attn_varlen_kvpacked_func": flash_attn_varlen_kvpacked_func},
        "flash_attn.ops": {},
        "flash_attn.ops.triton": {},
        "flash_attn.ops.triton.layer_norm": {"layer_norm_fn": layer_norm_fn},
    }
    register_stand_in("flash_attn", contents, __doc__)


__all__ = [
    "ALLOW_ON_GPU_ENV",
    "FALLBACK_MARKER",
    "RotaryEmbedding",
    "apply_rotary_emb",
    "ensure_flash_attn",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_with_kvcache",
    "install_flash_attn_fallback",
    "is_fallback_installed",
    "layer_norm_fn",
    "pad_input",
    "unpad_input",
]
