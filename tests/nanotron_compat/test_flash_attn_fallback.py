"""The pure-PyTorch flash-attn fallback against plain formulas (functions called directly: nothing installed)."""

import pytest
import torch
import torch.nn.functional as F

from lighteval_nanotron.nanotron_compat import flash_attn_fallback as fa

torch.manual_seed(0)


def _sdpa(q, k, v, causal):
    """q [L, Hq, D], k/v [L, Hk, D] -> [L, Hq, D] with PyTorch's attention (top-left causal, Lq == Lk)."""
    rep = q.shape[1] // k.shape[1]
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1),
        k.repeat_interleave(rep, 1).transpose(0, 1),
        v.repeat_interleave(rep, 1).transpose(0, 1),
        is_causal=causal,
    )
    return out.transpose(0, 1)


@pytest.mark.parametrize("causal", [True, False])
def test_varlen_attends_within_each_sequence(causal):
    lengths = [5, 1, 7]
    q, k, v = torch.randn(13, 4, 8), torch.randn(13, 2, 8), torch.randn(13, 2, 8)
    cu = torch.tensor([0, 5, 6, 13], dtype=torch.int32)
    out = fa.flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
    expected = torch.cat([_sdpa(q[a:b], k[a:b], v[a:b], causal) for a, b in [(0, 5), (5, 6), (6, 13)]])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_varlen_rows_past_the_last_sequence_are_zero_and_dtype_is_kept():
    q = torch.randn(6, 2, 4, dtype=torch.bfloat16)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    out = fa.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, causal=True)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    assert torch.all(out[4:] == 0)


def test_unpad_pad_round_trip():
    x = torch.randn(2, 4, 3, 5)
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    rows, indices, cu_seqlens, max_seqlen = fa.unpad_input(x, mask)
    assert rows.shape == (5, 3, 5) and cu_seqlens.tolist() == [0, 3, 5] and max_seqlen == 3
    assert torch.equal(fa.pad_input(rows, indices, 2, 4), x * mask[..., None, None])


def test_kvcache_decoding_equals_full_causal_attention():
    batch, length, max_len = 2, 6, 16
    q, k, v = torch.randn(batch, length, 4, 8), torch.randn(batch, length, 2, 8), torch.randn(batch, length, 2, 8)
    k_cache, v_cache = torch.zeros(batch, max_len, 2, 8), torch.zeros(batch, max_len, 2, 8)
    prefill = fa.flash_attn_with_kvcache(
        q[:, :4], k_cache, v_cache, k[:, :4], v[:, :4], cache_seqlens=torch.zeros(batch, dtype=torch.int32), causal=True
    )
    steps = [
        fa.flash_attn_with_kvcache(
            q[:, t : t + 1],
            k_cache,
            v_cache,
            k[:, t : t + 1],
            v[:, t : t + 1],
            cache_seqlens=torch.full((batch,), t),
            causal=True,
        )
        for t in range(4, length)
    ]
    out = torch.cat([prefill, *steps], dim=1)
    expected = torch.stack([_sdpa(q[b], k[b], v[b], causal=True) for b in range(batch)])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(k_cache[:, :length], k)


@pytest.mark.parametrize("interleaved", [True, False])
def test_rotary_rotates_q_and_k_but_not_v(interleaved):
    rotary = fa.RotaryEmbedding(dim=8, interleaved=interleaved)
    q, kv = torch.randn(2, 5, 4, 8), torch.randn(2, 5, 2, 2, 8)
    q_out, kv_out = rotary(q, kv=kv)
    angles = torch.outer(torch.arange(5.0), 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8.0))
    rotation = torch.polar(torch.ones_like(angles), angles)[None, :, None, :]
    if interleaved:
        pairs = torch.view_as_complex(q.reshape(2, 5, 4, 4, 2))
        expected = torch.view_as_real(pairs * rotation).reshape(q.shape)
    else:
        pairs = torch.complex(q[..., :4], q[..., 4:]) * rotation
        expected = torch.cat([pairs.real, pairs.imag], dim=-1)
    torch.testing.assert_close(q_out, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(kv_out[:, :, 1], kv[:, :, 1])
    assert not torch.allclose(kv_out[:, :, 0], kv[:, :, 0])


def test_rms_norm_with_residual_and_prenorm():
    x, residual, weight = torch.randn(3, 16), torch.randn(3, 16), torch.randn(16)
    out, summed = fa.layer_norm_fn(x, weight, None, residual=residual, eps=1e-5, prenorm=True, is_rms_norm=True)
    expected_sum = x + residual
    expected = expected_sum * torch.rsqrt(expected_sum.pow(2).mean(-1, keepdim=True) + 1e-5) * weight
    torch.testing.assert_close(summed, expected_sum)
    torch.testing.assert_close(out, expected)
    layer_norm = fa.layer_norm_fn(x, weight, torch.ones(16), eps=1e-5)
    torch.testing.assert_close(layer_norm, F.layer_norm(x, (16,), weight, torch.ones(16), eps=1e-5))


def test_unsupported_options_raise():
    q = torch.randn(4, 2, 8)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        fa.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, dropout_p=0.1)
