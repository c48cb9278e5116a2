"""Batched block-sparse attention over packed rows equals dense masked attention, and a decoder
layer run in token chunks equals the same layer run on the whole micro-batch."""

from types import SimpleNamespace

import pytest
import torch

from lighteval_nanotron.models.engine import attention_pieces
from lighteval_nanotron.models.engine.attention_pieces import attend, plan_attention
from lighteval_nanotron.models.engine.tree_attention import PrefixKeys, TreeAttention, ancestor_mask
from lighteval_nanotron.models.families.llama.family import LlamaLayer


def _random_forest(rows: int, n: int, generator: torch.Generator) -> torch.Tensor:
    parents = torch.empty((rows, n), dtype=torch.long)
    for r in range(rows):
        for i in range(n):
            choice = torch.randint(0, 4, (1,), generator=generator).item()
            # mostly chains, some branches and new roots (packed docs), parents precede children
            parents[r, i] = (
                i
                if i == 0 or choice == 0
                else (i - 1 if choice < 3 else torch.randint(0, i, (1,), generator=generator).item())
            )
    return parents


def _dense_reference(queries, keys, values, allowed, prefix_allowed):
    """Float64 masked softmax attention, row by row, over [prefix positions; the row's own nodes]."""
    rows, n, _ = allowed.shape
    context = 0 if prefix_allowed is None else prefix_allowed.shape[-1]
    repeat = queries.shape[1] // keys.shape[1]
    out = torch.empty_like(queries)
    for r in range(rows):
        own = slice(context + r * n, context + (r + 1) * n)
        k = torch.cat((keys[:context], keys[own])).double().repeat_interleave(repeat, dim=1)
        v = torch.cat((values[:context], values[own])).double().repeat_interleave(repeat, dim=1)
        q = queries[r * n : (r + 1) * n].double()
        seen = allowed[r] if prefix_allowed is None else torch.cat((prefix_allowed[r], allowed[r]), dim=-1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(~seen[None], float("-inf"))
        out[r * n : (r + 1) * n] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).to(out.dtype)
    return out


@pytest.mark.parametrize("with_prefix", [False, True])
@pytest.mark.parametrize("piece_queries", [16, 128])
def test_batched_pieces_equal_dense_attention(monkeypatch, with_prefix, piece_queries):
    monkeypatch.setattr(attention_pieces, "PIECE_QUERIES", piece_queries)
    generator = torch.Generator().manual_seed(0)
    rows, n, q_heads, kv_heads, dim, context = 3, 300, 6, 2, 8, 40
    allowed = ancestor_mask(_random_forest(rows, n, generator))
    prefix_allowed = None
    if with_prefix:  # the second half of each row reads some prefix positions
        prefix_allowed = torch.rand(rows, n, context, generator=generator) < 0.3
        prefix_allowed[:, : n // 2] = False
    used = context if with_prefix else 0
    queries = torch.randn(rows * n, q_heads, dim, generator=generator)
    keys = torch.randn(used + rows * n, kv_heads, dim, generator=generator)
    values = torch.randn(used + rows * n, kv_heads, dim, generator=generator)
    plan = plan_attention(allowed, prefix_allowed)
    assert plan.groups and plan.singles.numel() + sum(g.targets.numel() for g in plan.groups) == rows * n
    got = attend(plan, queries, keys, values, torch.float32)
    want = _dense_reference(queries, keys, values, allowed, prefix_allowed)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def _layer(generator: torch.Generator, width: int, q_heads: int, kv_heads: int, dim: int) -> LlamaLayer:
    qkv = torch.nn.Linear(width, (q_heads + 2 * kv_heads) * dim)
    out = torch.nn.Linear(q_heads * dim, width)
    up, down = torch.nn.Linear(width, 3 * width), torch.nn.Linear(3 * width, width)
    module = SimpleNamespace(
        attn=SimpleNamespace(
            qkv_proj=qkv,
            o_proj=out,
            n_local_q_heads=q_heads,
            n_local_kv_heads=kv_heads,
            d_qk=dim,
            flash_rotary_embedding=SimpleNamespace(base=10000.0, interleaved=True),
        ),
        input_layernorm=torch.nn.LayerNorm(width),
        post_attention_layernorm=torch.nn.LayerNorm(width),
        mlp=lambda hidden_states: {"hidden_states": down(torch.relu(up(hidden_states)))},
    )
    return LlamaLayer(module)


def test_layer_in_token_chunks_equals_whole_batch():
    generator = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    rows, n, width, context = 2, 90, 16, 12
    layer = _layer(generator, width, 4, 2, 4)
    allowed = ancestor_mask(_random_forest(rows, n, generator))
    depths = allowed.sum(-1) - 1 + context
    store = {0: (torch.randn(context, 2, 4, generator=generator), torch.randn(context, 2, 4, generator=generator))}
    prefix_allowed = torch.zeros(rows, n, context, dtype=torch.bool)
    prefix_allowed[:, n // 3 :] = True
    hidden = torch.randn(n, rows, width, generator=generator)
    with torch.no_grad():
        outputs = []
        for chunk in (None, 7, 64):
            prefix = PrefixKeys(store, torch.arange(context), prefix_allowed)
            tree = TreeAttention(depths, allowed, prefix=prefix, chunk_tokens=chunk)
            outputs.append(tree.run_layer(layer, hidden, 0))
            assert tree._plan is not None
    for other in outputs[1:]:
        torch.testing.assert_close(other, outputs[0], rtol=1e-5, atol=1e-6)
