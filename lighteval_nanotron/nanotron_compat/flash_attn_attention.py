"""The attention part of the CPU flash-attn stand-in, in plain PyTorch (flash-attn 2.6's API).

Nanotron 0.4 calls `flash_attn_varlen_func` and `flash_attn_with_kvcache`; current Nanotron also
`flash_attn_func` (its "flash_attention_2" implementation), `flash_attn_varlen_kvpacked_func`
(Qwen2) and the low-level `_flash_attn_varlen_forward` / `_flash_attn_varlen_backward` (its ring
attentions, which need the log-sum-exp). Semantics follow flash-attn: varlen sequences are read from
`cu_seqlens` over the packed rows (rows past `cu_seqlens[-1]` come back as zeros), causal masks and
sliding windows `(left, right)` are aligned to the bottom-right corner, query heads share KV heads
in groups (GQA), queries with no key get zeros (and log-sum-exp +inf). Attention is
`torch.nn.functional.scaled_dot_product_attention` (fp32 on CPU, the input dtype on a GPU), or
explicit fp32 math where the log-sum-exp is returned.

Not supported (raise `NotImplementedError`): dropout, ALiBi, softcap, paged or indexed KV caches,
rotary inside `flash_attn_with_kvcache`, returned attention probabilities.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F

Window = Tuple[int, int]
NO_WINDOW: Window = (-1, -1)


def _unsupported(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"The CPU flash-attn fallback does not support {name}; install the real flash-attn on a GPU to use it."
    )


def _check_common(dropout_p: float, softcap: float, alibi_slopes) -> None:
    if dropout_p:
        raise _unsupported("dropout_p > 0")
    if softcap:
        raise _unsupported("softcap")
    if alibi_slopes is not None:
        raise _unsupported("alibi_slopes")


def _allowed(len_q: int, len_k: int, causal: bool, window: Window, device: torch.device) -> torch.Tensor:
    """[len_q, len_k] bool: which keys each query sees (flash-attn's bottom-right alignment)."""
    left, right = window
    if causal:
        right = 0
    rows = torch.arange(len_q, device=device)[:, None] + (len_k - len_q)
    cols = torch.arange(len_k, device=device)[None, :]
    allowed = torch.ones(len_q, len_k, dtype=torch.bool, device=device)
    if right >= 0:
        allowed &= cols <= rows + right
    if left >= 0:
        allowed &= cols >= rows - left
    return allowed


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool, window: Window = NO_WINDOW
) -> torch.Tensor:
    """q [Lq, Hq, D], k/v [Lk, Hk, D] (Hq a multiple of Hk) -> [Lq, Hq, Dv] in q's dtype, through
    `scaled_dot_product_attention` (fp32 on CPU, q's dtype elsewhere)."""
    compute = torch.float32 if q.device.type == "cpu" else q.dtype
    n_rep = q.shape[1] // k.shape[1]
    qc = q.to(compute).transpose(0, 1)
    kc = k.to(compute).repeat_interleave(n_rep, dim=1).transpose(0, 1)
    vc = v.to(compute).repeat_interleave(n_rep, dim=1).transpose(0, 1)
    len_q, len_k = q.shape[0], k.shape[0]
    if tuple(window) == NO_WINDOW and (not causal or len_q == len_k):
        out = F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal, scale=scale)
    else:  # queries with no key come back as zeros
        allowed = _allowed(len_q, len_k, causal, tuple(window), q.device)
        out = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=allowed, scale=scale)
        out = out.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    return out.transpose(0, 1).to(q.dtype)


def _attend_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool, window: Window
) -> Tuple[torch.Tensor, torch.Tensor]:
    """`_attend` in explicit fp32 math, also returning the log-sum-exp [Hq, Lq] (+inf with no key)."""
    n_rep = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(n_rep, dim=1)
    vf = v.float().repeat_interleave(n_rep, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), kf) * scale
    allowed = _allowed(q.shape[0], k.shape[0], causal, tuple(window), q.device)
    scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    empty = ~allowed.any(dim=-1)  # [Lq]
    probs = torch.exp(scores - lse.masked_fill(empty, 0.0)[..., None]).masked_fill(empty[:, None], 0.0)
    out = torch.einsum("hqk,khd->qhd", probs, vf)
    return out.to(q.dtype), lse.masked_fill(empty, float("inf"))


def _bounds(cu_seqlens: torch.Tensor) -> list[int]:
    return [int(bound) for bound in cu_seqlens.tolist()]


def _scale(q: torch.Tensor, softmax_scale: Optional[float]) -> float:
    return softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5


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
    window_size: Window = NO_WINDOW,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Attention over packed sequences: q [total_q, Hq, D], k/v [total_k, Hk, D]; sequence i is rows
    cu_seqlens[i]:cu_seqlens[i+1]."""
    _check_common(dropout_p, softcap, alibi_slopes)
    if return_attn_probs:
        raise _unsupported("return_attn_probs")
    if block_table is not None:
        raise _unsupported("block_table")
    scale = _scale(q, softmax_scale)
    bounds_q, bounds_k = _bounds(cu_seqlens_q), _bounds(cu_seqlens_k)
    outputs = [
        _attend(
            q[bounds_q[i] : bounds_q[i + 1]],
            k[bounds_k[i] : bounds_k[i + 1]],
            v[bounds_k[i] : bounds_k[i + 1]],
            scale,
            causal,
            window_size,
        )
        for i in range(len(bounds_q) - 1)
    ]
    tail = q.shape[0] - bounds_q[-1]
    if tail:
        outputs.append(q.new_zeros(tail, q.shape[1], v.shape[-1]))
    return torch.cat(outputs, dim=0)


def flash_attn_varlen_kvpacked_func(
    q: torch.Tensor,
    kv: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Window = NO_WINDOW,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
) -> torch.Tensor:
    """`flash_attn_varlen_func` with keys and values packed: kv [total_k, 2, Hk, D]."""
    return flash_attn_varlen_func(
        q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
        softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs,
    )  # fmt: skip


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Window = NO_WINDOW,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
) -> torch.Tensor:
    """Attention over a padded batch: q [B, Lq, Hq, D], k/v [B, Lk, Hk, D] -> [B, Lq, Hq, Dv]."""
    _check_common(dropout_p, softcap, alibi_slopes)
    if return_attn_probs:
        raise _unsupported("return_attn_probs")
    scale = _scale(q, softmax_scale)
    return torch.stack([_attend(q[b], k[b], v[b], scale, causal, window_size) for b in range(q.shape[0])])


def _varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, scale, causal, window) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [total_q, Hq, Dv], lse [Hq, total_q]) over packed sequences."""
    bounds_q, bounds_k = _bounds(cu_seqlens_q), _bounds(cu_seqlens_k)
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[-1])
    lse = torch.full((q.shape[1], q.shape[0]), float("inf"), dtype=torch.float32, device=q.device)
    for i in range(len(bounds_q) - 1):
        rows = slice(bounds_q[i], bounds_q[i + 1])
        keys = slice(bounds_k[i], bounds_k[i + 1])
        out[rows], lse[:, rows] = _attend_with_lse(q[rows], k[keys], v[keys], scale, causal, window)
    return out, lse


def _flash_attn_varlen_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float,
    softmax_scale: Optional[float],
    causal: bool,
    window_size: Window = NO_WINDOW,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    return_softmax: bool = False,
    block_table: Optional[torch.Tensor] = None,
    leftpad_k: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
):
    """flash-attn 2.6's low-level varlen forward: (out, q, k, v, out_padded, softmax_lse [Hq, total_q],
    S_dmask, rng_state); no autograd (the backward is `_flash_attn_varlen_backward`)."""
    _check_common(dropout_p, softcap, alibi_slopes)
    for name, value in (("block_table", block_table), ("leftpad_k", leftpad_k), ("seqused_k", seqused_k)):
        if value is not None:
            raise _unsupported(name)
    if return_softmax:
        raise _unsupported("return_softmax")
    with torch.no_grad():
        out, lse = _varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, _scale(q, softmax_scale), causal, window_size)
    return out, q, k, v, out, lse, None, None


def _flash_attn_varlen_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    softmax_lse: torch.Tensor,
    dq: Optional[torch.Tensor],
    dk: Optional[torch.Tensor],
    dv: Optional[torch.Tensor],
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float,
    softmax_scale: Optional[float],
    causal: bool,
    window_size: Window = NO_WINDOW,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    rng_state: Optional[torch.Tensor] = None,
):
    """flash-attn 2.6's low-level varlen backward: gradients of the forward's output written into
    dq/dk/dv (allocated when None) and returned with softmax_d = rowsum(dout * out) [Hq, total_q]."""
    _check_common(dropout_p, softcap, alibi_slopes)
    with torch.enable_grad():
        leaves = [tensor.detach().requires_grad_(True) for tensor in (q, k, v)]
        recomputed, _ = _varlen_with_lse(
            *leaves, cu_seqlens_q, cu_seqlens_k, _scale(q, softmax_scale), causal, window_size
        )
        grads = torch.autograd.grad(recomputed, leaves, dout.to(recomputed.dtype), allow_unused=True)
    results = []
    for target, grad, like in zip((dq, dk, dv), grads, (q, k, v)):
        grad = torch.zeros_like(like) if grad is None else grad.to(like.dtype)
        if target is None:
            target = grad
        else:
            target.copy_(grad)
        results.append(target)
    softmax_d = (dout.float() * out.float()).sum(dim=-1).transpose(0, 1).contiguous()
    return (*results, softmax_d)


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
    window_size: Window = NO_WINDOW,
    softcap: float = 0.0,
    rotary_interleaved: bool = True,
    alibi_slopes: Optional[torch.Tensor] = None,
    num_splits: int = 0,
    return_softmax_lse: bool = False,
) -> torch.Tensor:
    """Decode step: write k/v [B, Lnew, Hk, D] into the caches [B, Lmax, Hk, D] at `cache_seqlens`
    (in place, as flash-attn does), then attend q [B, Lq, Hq, D] to the first cache_seqlens + Lnew keys."""
    _check_common(0.0, softcap, alibi_slopes)
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
    scale = _scale(q, softmax_scale)
    outputs = []
    for b, length in enumerate(lengths):
        if k is not None:
            k_cache[b, length : length + n_new] = k[b]
            v_cache[b, length : length + n_new] = v[b]
        end = length + n_new
        outputs.append(_attend(q[b], k_cache[b, :end], v_cache[b, :end], scale, causal, window_size))
    return torch.stack(outputs, dim=0)
