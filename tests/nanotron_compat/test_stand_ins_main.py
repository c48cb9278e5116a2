"""The parts of the CPU stand-ins that current Nanotron (GitHub main) needs, against plain formulas:
flash-attn's padded / kv-packed / windowed attention, its low-level varlen forward and backward
(log-sum-exp, gradients), rotary with per-sequence offsets and packed sequences, a subclass that
overrides the rotary cache (as main's `FlashRotaryEmbedding`), and grouped_gemm's ops (functions
called directly: nothing installed)."""

import pytest
import torch

from lighteval_nanotron.nanotron_compat import flash_attn_fallback as fa
from lighteval_nanotron.nanotron_compat import grouped_gemm_fallback as gg
from lighteval_nanotron.nanotron_compat.flash_attn_attention import (
    _flash_attn_varlen_backward,
    _flash_attn_varlen_forward,
)

torch.manual_seed(0)


def _reference(q, k, v, causal, window=(-1, -1), scale=None):
    """q [Lq, Hq, D], k/v [Lk, Hk, D]: explicit softmax attention, a loop over query rows and heads,
    bottom-right aligned; (out [Lq, Hq, D], lse [Hq, Lq]) with zeros / +inf where no key is seen."""
    len_q, heads, dim = q.shape
    len_k, rep = k.shape[0], q.shape[1] // k.shape[1]
    scale = dim**-0.5 if scale is None else scale
    left, right = window
    right = 0 if causal else right
    out, lse = torch.zeros(len_q, heads, v.shape[-1]), torch.full((heads, len_q), float("inf"))
    for i in range(len_q):
        aligned = i + len_k - len_q
        keys = [j for j in range(len_k) if (right < 0 or j <= aligned + right) and (left < 0 or j >= aligned - left)]
        if not keys:
            continue
        for h in range(heads):
            scores = torch.stack([q[i, h] @ k[j, h // rep] for j in keys]) * scale
            lse[h, i] = torch.logsumexp(scores, 0)
            out[i, h] = sum(p * v[j, h // rep] for p, j in zip(torch.softmax(scores, 0), keys))
    return out, lse


@pytest.mark.parametrize("causal", [True, False])
def test_padded_attention_with_gqa_and_unequal_lengths(causal):
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 5, 2, 8), torch.randn(2, 5, 2, 8)
    out = fa.flash_attn_func(q, k, v, causal=causal)
    expected = torch.stack([_reference(q[b], k[b], v[b], causal)[0] for b in range(2)])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_sliding_window_and_kv_packed_varlen():
    q, kv = torch.randn(9, 4, 8), torch.randn(9, 2, 2, 8)
    cu = torch.tensor([0, 6, 9], dtype=torch.int32)
    out = fa.flash_attn_varlen_kvpacked_func(q, kv, cu, cu, 6, 6, causal=True, window_size=(2, 0))
    expected = torch.cat([_reference(q[a:b], kv[a:b, 0], kv[a:b, 1], True, (2, 0))[0] for a, b in [(0, 6), (6, 9)]])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_low_level_forward_gives_log_sum_exp_and_backward_gives_gradients():
    q, k, v = (torch.randn(7, 4, 8) for _ in range(3))
    k, v = k[:, :2].contiguous(), v[:, :2].contiguous()
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    outputs = _flash_attn_varlen_forward(q, k, v, cu, cu, 4, 4, 0.0, None, True)
    assert len(outputs) == 8  # flash-attn 2.6: out, q, k, v, out_padded, softmax_lse, S_dmask, rng_state
    out, lse = outputs[0], outputs[5]
    parts = [_reference(q[a:b], k[a:b], v[a:b], True) for a, b in [(0, 3), (3, 7)]]
    torch.testing.assert_close(out, torch.cat([p[0] for p in parts]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, torch.cat([p[1] for p in parts], dim=1), atol=1e-5, rtol=1e-5)

    dout = torch.randn_like(out)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    returned = _flash_attn_varlen_backward(dout, q, k, v, out, lse, dq, dk, dv, cu, cu, 4, 4, 0.0, None, True)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    reference = torch.cat([_reference(leaves[0][a:b], leaves[1][a:b], leaves[2][a:b], True)[0]
                           for a, b in [(0, 3), (3, 7)]])  # fmt: skip
    expected = torch.autograd.grad(reference, leaves, dout)
    for written, grad in zip((dq, dk, dv), expected):
        torch.testing.assert_close(written, grad, atol=1e-5, rtol=1e-5)
    assert returned[0] is dq and returned[3].shape == (4, 7)


def _rotated(x, positions, base, interleaved):
    """x [..., H, D] rotated by angle position * base^(-2i/D), via complex numbers."""
    dim = x.shape[-1]
    angles = positions[..., None].double() * (1.0 / base ** (torch.arange(0, dim, 2).double() / dim))
    rotation = torch.polar(torch.ones_like(angles), angles)[..., None, :]
    if interleaved:
        pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], dim // 2, 2).contiguous())
        return torch.view_as_real(pairs * rotation).reshape(x.shape).float()
    pairs = torch.complex(x[..., : dim // 2].double(), x[..., dim // 2 :].double()) * rotation
    return torch.cat([pairs.real, pairs.imag], dim=-1).float()


@pytest.mark.parametrize("interleaved", [True, False])
def test_apply_rotary_emb_offsets_and_packed_sequences(interleaved):
    rotary = fa.RotaryEmbedding(dim=8, base=500.0, interleaved=interleaved)
    rotary._update_cos_sin_cache(16, device=torch.device("cpu"), dtype=torch.float32)
    cos, sin = rotary._cos_cached, rotary._sin_cached
    x = torch.randn(2, 5, 3, 8)
    offsets = torch.tensor([0, 4])
    out = fa.apply_rotary_emb(x, cos, sin, interleaved=interleaved, seqlen_offsets=offsets)
    positions = torch.arange(5)[None, :] + offsets[:, None]
    torch.testing.assert_close(out, _rotated(x, positions, 500.0, interleaved), atol=1e-5, rtol=1e-5)

    packed = torch.randn(9, 3, 8)
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    out = fa.apply_rotary_emb(packed, cos, sin, interleaved=interleaved, cu_seqlens=cu, max_seqlen=5)
    positions = torch.cat([torch.arange(4), torch.arange(5)])
    torch.testing.assert_close(out, _rotated(packed, positions, 500.0, interleaved), atol=1e-5, rtol=1e-5)

    half = fa.apply_rotary_emb(x, cos[:, :2], sin[:, :2], interleaved=interleaved)  # rotary_dim 4 of 8
    assert torch.equal(half[..., 4:], x[..., 4:])


def test_a_subclass_overriding_the_rotary_cache_is_used():
    """Main's FlashRotaryEmbedding derives from flash-attn's class and rewrites `_update_cos_sin_cache`."""

    class Interpolated(fa.RotaryEmbedding):
        def _update_cos_sin_cache(self, seqlen, device=None, dtype=None):
            positions = torch.arange(seqlen, device=device, dtype=torch.float32) / 2  # linear interpolation
            freqs = torch.outer(positions, self.inv_freq)
            self._seq_len_cached, self._cos_cached, self._sin_cached = (
                seqlen,
                freqs.cos().to(dtype),
                freqs.sin().to(dtype),
            )

    q, kv = torch.randn(1, 6, 2, 8), torch.randn(1, 6, 2, 2, 8)
    q_out, kv_out = Interpolated(dim=8)(q, kv=kv, seqlen_offset=0, max_seqlen=6)
    torch.testing.assert_close(q_out, _rotated(q, torch.arange(6) / 2, 10000.0, False), atol=1e-5, rtol=1e-5)
    assert torch.equal(kv_out[:, :, 1], kv[:, :, 1])


def test_the_stand_in_reports_the_flash_attn_version_it_follows():
    assert fa.VERSION == "2.6.3"


# ---------------------------------------------------------------- grouped_gemm


@pytest.mark.parametrize("trans_b", [False, True])
def test_gmm_equals_a_loop_of_matmuls_with_gradients(trans_b):
    sizes = torch.tensor([3, 0, 5, 2])
    a = torch.randn(10, 6, requires_grad=True)
    b = torch.randn(4, 7, 6, requires_grad=True) if trans_b else torch.randn(4, 6, 7, requires_grad=True)
    out = gg.gmm(a, b, sizes, trans_b=trans_b)
    starts = [0, 3, 3, 8, 10]
    loop = torch.cat([a[starts[e] : starts[e + 1]] @ (b[e].t() if trans_b else b[e]) for e in range(4)])
    torch.testing.assert_close(out, loop)
    grads = torch.autograd.grad(out.square().sum(), (a, b))
    expected = torch.autograd.grad(loop.square().sum(), (a, b))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="all zeros"):
        gg.gmm(a[:0], b, torch.zeros(4, dtype=torch.long))


def test_permute_sorts_token_copies_by_expert_and_unpermute_weights_them_back():
    tokens = torch.randn(5, 3, requires_grad=True)
    indices = torch.tensor([[2, 0], [1, 2], [0, 1], [2, 1], [0, 0]], dtype=torch.int32)
    permuted, row_id_map = gg.permute(tokens, indices)
    # stable sort of the flattened experts: copy (t, k) is row t * 2 + k
    order = [(0, 1), (2, 0), (4, 0), (4, 1), (1, 0), (2, 1), (3, 1), (0, 0), (1, 1), (3, 0)]
    assert torch.equal(permuted, torch.stack([tokens[t] for t, _ in order]))
    assert row_id_map.dtype == torch.int32 and row_id_map.shape == (10,)
    for row, (t, k) in enumerate(order):
        assert row_id_map[k * 5 + t] == row
    probs = torch.rand(5, 2)
    expert_out = permuted * 3.0
    combined = gg.unpermute(expert_out, row_id_map, probs)
    torch.testing.assert_close(combined, 3.0 * tokens * probs.sum(dim=1, keepdim=True))
    (grad,) = torch.autograd.grad(combined.sum(), tokens)
    torch.testing.assert_close(grad, 3.0 * probs.sum(dim=1, keepdim=True).expand(5, 3))


def test_permute_drops_copies_past_num_out_tokens():
    tokens = torch.randn(3, 2)
    indices = torch.tensor([[1], [0], [1]], dtype=torch.int32)
    permuted, row_id_map = gg.permute(tokens, indices, num_out_tokens=2)
    assert torch.equal(permuted, tokens[[1, 0]]) and row_id_map.tolist() == [1, 0, -1]
    combined = gg.unpermute(permuted, row_id_map, torch.ones(3, 1))  # probs give the token count
    assert torch.equal(combined, torch.stack([tokens[0], tokens[1], torch.zeros(2)]))
