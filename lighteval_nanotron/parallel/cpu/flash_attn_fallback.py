"""A PyTorch stand-in for the parts of `flash_attn` that Nanotron 0.4 imports, for CPU machines.

`nanotron/models/llama.py:20-25` and `nanotron/nn/layer_norm.py:2` import flash-attn at module
level; flash-attn cannot be installed without CUDA. `install_flash_attn_fallback` registers this
module's functions under flash-attn's module names in `sys.modules`, so the model imports and runs
on CPU. The semantics follow flash-attn 2 exactly where Nanotron depends on them: varlen sequences
are read from `cu_seqlens` over the packed rows, causal masks are aligned to the bottom-right
corner, rows past `cu_seqlens[-1]` come back as zeros. Attention is
`torch.nn.functional.scaled_dot_product_attention` (fp32 on CPU, the input dtype on a GPU so that
its flash / memory-efficient kernels apply); rotary and normalisation math is done in fp32 and
cast back to the input dtype.

When it is installed (`install_flash_attn_fallback`, `ensure_flash_attn`):
- a real flash-attn that can be imported is never replaced (except by `force=True`, which
  `enable_cpu_support()` passes: flash-attn kernels cannot take CPU tensors);
- on a machine without CUDA, where flash-attn is missing;
- on a CUDA machine without flash-attn only when asked for (`allow_on_gpu=True` or
  `LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK=1`): training there should use the real kernels.
It says so once in the log (a warning) when it is installed.

Not supported (raise `NotImplementedError`): dropout, sliding windows, ALiBi, softcap, paged or
indexed KV caches, rotary inside `flash_attn_with_kvcache`, xPos rotary scaling.
"""

import importlib.machinery
import importlib.util
import logging
import os
import sys
from types import ModuleType
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from lighteval_nanotron.errors import ConfigError

FALLBACK_MARKER = "__lighteval_nanotron_fallback__"
ALLOW_ON_GPU_ENV = "LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK"
"""Set to 1 to use the stand-in on a CUDA machine without flash-attn."""

logger = logging.getLogger(__name__)


def _unsupported(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"The CPU flash-attn fallback does not support {name}; install the real flash-attn on a GPU to use it."
    )


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


# ---------------------------------------------------------------- attention


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """q [Lq, Hq, D], k/v [Lk, Hk, D] (Hq a multiple of Hk) -> [Lq, Hq, Dv] in q's dtype, through
    `scaled_dot_product_attention` (fp32 on CPU, q's dtype elsewhere)."""
    compute = torch.float32 if q.device.type == "cpu" else q.dtype
    n_rep = q.shape[1] // k.shape[1]
    qc = q.to(compute).transpose(0, 1)
    kc = k.to(compute).repeat_interleave(n_rep, dim=1).transpose(0, 1)
    vc = v.to(compute).repeat_interleave(n_rep, dim=1).transpose(0, 1)
    len_q, len_k = q.shape[0], k.shape[0]
    if not causal or len_q == len_k:
        out = F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal, scale=scale)
    else:  # flash-attn aligns the causal mask bottom-right; queries with no key come back as zeros
        rows = torch.arange(len_q, device=q.device)[:, None]
        cols = torch.arange(len_k, device=q.device)[None, :]
        allowed = cols <= rows + (len_k - len_q)
        out = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=allowed, scale=scale)
        out = out.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    return out.transpose(0, 1).to(q.dtype)


def _check_common(dropout_p: float, window_size: Tuple[int, int], softcap: float, alibi_slopes) -> None:
    if dropout_p:
        raise _unsupported("dropout_p > 0")
    if tuple(window_size) != (-1, -1):
        raise _unsupported("window_size")
    if softcap:
        raise _unsupported("softcap")
    if alibi_slopes is not None:
        raise _unsupported("alibi_slopes")


def flash_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Attention over packed sequences: q [total_q, Hq, D], k/v [total_k, Hk, D]; sequence i is rows
    cu_seqlens[i]:cu_seqlens[i+1]."""
    _check_common(dropout_p, window_size, softcap, alibi_slopes)
    if return_attn_probs:
        raise _unsupported("return_attn_probs")
    if block_table is not None:
        raise _unsupported("block_table")
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outputs = [
        _attend(
            q[bounds_q[i] : bounds_q[i + 1]],
            k[bounds_k[i] : bounds_k[i + 1]],
            v[bounds_k[i] : bounds_k[i + 1]],
            scale,
            causal,
        )
        for i in range(len(bounds_q) - 1)
    ]
    tail = q.shape[0] - bounds_q[-1]
    if tail:
        outputs.append(q.new_zeros(tail, q.shape[1], v.shape[-1]))
    return torch.cat(outputs, dim=0)


def flash_attn_with_kvcache(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k: Optional[torch.Tensor] = None,
    v: Optional[torch.Tensor] = None,
    rotary_cos: Optional[torch.Tensor] = None,
    rotary_sin: Optional[torch.Tensor] = None,
    cache_seqlens: Optional[Union[int, torch.Tensor]] = None,
    cache_batch_idx: Optional[torch.Tensor] = None,
    cache_leftpad: Optional[torch.Tensor] = None,
    block_table: Optional[torch.Tensor] = None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    rotary_interleaved: bool = True,
    alibi_slopes: Optional[torch.Tensor] = None,
    num_splits: int = 0,
    return_softmax_lse: bool = False,
) -> torch.Tensor:
    """Decode step: write k/v [B, Lnew, Hk, D] into the caches [B, Lmax, Hk, D] at `cache_seqlens`
    (in place, as flash-attn does), then attend q [B, Lq, Hq, D] to the first cache_seqlens + Lnew keys."""
    _check_common(0.0, window_size, softcap, alibi_slopes)
    for name, value in (
        ("rotary_cos", rotary_cos),
        ("cache_batch_idx", cache_batch_idx),
        ("cache_leftpad", cache_leftpad),
        ("block_table", block_table),
    ):
        if value is not None:
            raise _unsupported(name)
    if return_softmax_lse:
        raise _unsupported("return_softmax_lse")
    batch = q.shape[0]
    if cache_seqlens is None:
        lengths = [k_cache.shape[1] if k is None else 0] * batch
    elif isinstance(cache_seqlens, int):
        lengths = [cache_seqlens] * batch
    else:
        lengths = cache_seqlens.tolist()
    n_new = 0 if k is None else k.shape[1]
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    outputs = []
    for b, length in enumerate(lengths):
        if k is not None:
            k_cache[b, length : length + n_new] = k[b]
            v_cache[b, length : length + n_new] = v[b]
        end = length + n_new
        outputs.append(_attend(q[b], k_cache[b, :end], v_cache[b, :end], scale, causal))
    return torch.stack(outputs, dim=0)


# ---------------------------------------------------------------- rotary


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """x [B, L, H, D]; cos/sin [B or 1, L, D/2] in x's dtype; math in fp32 like flash-attn's kernel."""
    xf = x.float()
    cos, sin = cos.float()[:, :, None, :], sin.float()[:, :, None, :]
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    else:
        x1, x2 = xf.chunk(2, dim=-1)
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """flash_attn.layers.rotary.RotaryEmbedding: rotary position embedding applied to q and k.

    `forward(qkv)` takes [B, L, 3, H, D]; `forward(q, kv=kv)` takes q [B, L, H, D] and
    kv [B, L, 2, Hk, D] and returns (q, kv). Unlike flash-attn it does not modify its inputs.
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
        self.interleaved = interleaved

    def _cos_sin(
        self, seqlen: int, offset: Union[int, torch.Tensor], device: torch.device, dtype: torch.dtype
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))
        positions = torch.arange(seqlen, device=device, dtype=torch.float32)[None, :]
        if isinstance(offset, torch.Tensor):
            positions = positions + offset.to(device=device, dtype=torch.float32)[:, None]
        else:
            positions = positions + offset
        freqs = positions[..., None] * inv_freq
        return torch.cos(freqs).to(dtype), torch.sin(freqs).to(dtype)

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
        cos, sin = self._cos_sin(qkv.shape[1], seqlen_offset, qkv.device, qkv.dtype)
        if kv is None:
            q = _rotate(qkv[:, :, 0], cos, sin, self.interleaved)
            k = _rotate(qkv[:, :, 1], cos, sin, self.interleaved)
            return torch.stack((q, k, qkv[:, :, 2]), dim=2)
        q = _rotate(qkv, cos, sin, self.interleaved)
        k = _rotate(kv[:, :, 0], cos, sin, self.interleaved)
        return q, torch.stack((k, kv[:, :, 1]), dim=2)


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


def _module(name: str, **attrs: object) -> ModuleType:
    module = ModuleType(name, __doc__)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    module.__path__ = []
    setattr(module, FALLBACK_MARKER, True)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def is_fallback_installed() -> bool:
    """True when `flash_attn` in `sys.modules` is this fallback."""
    return getattr(sys.modules.get("flash_attn"), FALLBACK_MARKER, False)


def _real_flash_attn_available() -> bool:
    if is_fallback_installed():
        return False
    try:
        return importlib.util.find_spec("flash_attn") is not None
    except (ImportError, ValueError):
        return False


def _allowed_here(allow_on_gpu: bool | None) -> tuple[bool, str]:
    """(may the stand-in be installed on this machine, why)."""
    if not torch.cuda.is_available():
        return True, "no CUDA device"
    if allow_on_gpu is None:
        allow_on_gpu = os.environ.get(ALLOW_ON_GPU_ENV, "") == "1"
    return allow_on_gpu, f"asked for ({ALLOW_ON_GPU_ENV}=1 or allow_on_gpu=True)"


def install_flash_attn_fallback(force: bool = False, allow_on_gpu: bool | None = None) -> bool:
    """Register the stand-in under flash-attn's module names where the policy of the module
    docstring allows it; idempotent. Returns True when the stand-in is active.

    A real flash-attn that is installed is left in place (returns False) unless `force` (what
    `enable_cpu_support` does: flash-attn kernels cannot take CPU tensors); then the stand-in
    replaces it, also inside `nanotron.models.llama` / `nanotron.nn.layer_norm` if those were
    already imported. `allow_on_gpu` (default: `LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK=1`): install
    it on a CUDA machine without flash-attn too.
    """
    if is_fallback_installed():
        return True
    if force:
        reason = "asked for (CPU support enabled)"
    else:
        if _real_flash_attn_available():
            return False
        allowed, reason = _allowed_here(allow_on_gpu)
        if not allowed:
            return False
    _register()
    logger.warning(
        "flash-attn stand-in in use (%s): Nanotron's attention runs on scaled_dot_product_attention, "
        "rotary and RMSNorm on plain PyTorch (lighteval_nanotron.parallel.cpu.flash_attn_fallback).",
        reason,
    )
    return True


def ensure_flash_attn(allow_on_gpu: bool | None = None) -> str:
    """Make `import flash_attn` work before Nanotron's Llama is imported: "flash-attn" when the
    real one is installed, "stand-in" when the stand-in is (now) active. Raises ConfigError on a
    CUDA machine without flash-attn unless the stand-in is asked for."""
    if install_flash_attn_fallback(allow_on_gpu=allow_on_gpu):
        return "stand-in"
    if _real_flash_attn_available():
        return "flash-attn"
    raise ConfigError(
        "flash-attn is not installed on this CUDA machine and Nanotron's Llama needs it: install it "
        f"(pip install flash-attn), or set {ALLOW_ON_GPU_ENV}=1 to run attention on PyTorch's "
        "scaled_dot_product_attention instead."
    )


def _register() -> None:
    interface = {"flash_attn_varlen_func": flash_attn_varlen_func, "flash_attn_with_kvcache": flash_attn_with_kvcache}
    contents = {
        "flash_attn": interface,
        "flash_attn.bert_padding": {"unpad_input": unpad_input, "pad_input": pad_input},
        "flash_attn.flash_attn_interface": interface,
        "flash_attn.layers": {},
        "flash_attn.layers.rotary": {"RotaryEmbedding": RotaryEmbedding},
        "flash_attn.ops": {},
        "flash_attn.ops.triton": {},
        "flash_attn.ops.triton.layer_norm": {"layer_norm_fn": layer_norm_fn},
    }
    modules = {name: _module(name, **attrs) for name, attrs in contents.items()}
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    for name in [n for n in sys.modules if n == "flash_attn" or n.startswith("flash_attn.")]:
        del sys.modules[name]
    sys.modules.update(modules)
    _rebind_imported_nanotron_modules()


def _rebind_imported_nanotron_modules() -> None:
    """Point names that Nanotron modules imported from a real flash-attn at the fallback."""
    llama = sys.modules.get("nanotron.models.llama")
    if llama is not None:
        llama.bert_padding = sys.modules["flash_attn.bert_padding"]
        llama.flash_attn_varlen_func = flash_attn_varlen_func
        llama.flash_attn_with_kvcache = flash_attn_with_kvcache
        llama.FlashRotaryEmbedding = RotaryEmbedding
    layer_norm = sys.modules.get("nanotron.nn.layer_norm")
    if layer_norm is not None:
        layer_norm.layer_norm_fn = layer_norm_fn
