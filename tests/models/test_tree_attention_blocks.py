"""Block-sparse attention over long packed rows equals the dense masked call."""

from types import SimpleNamespace

import torch

from lighteval_nanotron.models.families.llama import LlamaLayer
from lighteval_nanotron.models.nanotron import tree_attention
from lighteval_nanotron.models.nanotron.tree_attention import TreeAttention, ancestor_mask


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


def test_block_sparse_equals_dense(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    rows, n, nq, nkv, dim = 2, 300, 4, 2, 8
    parents = _random_forest(rows, n, generator)
    allowed = ancestor_mask(parents)
    depths = allowed.sum(-1) - 1
    qkv = torch.nn.Linear(16, (nq + 2 * nkv) * dim)
    layer = LlamaLayer(
        SimpleNamespace(
            attn=SimpleNamespace(
                qkv_proj=qkv,
                o_proj=lambda x: x,
                n_local_q_heads=nq,
                n_local_kv_heads=nkv,
                d_qk=dim,
                flash_rotary_embedding=SimpleNamespace(base=10000.0, interleaved=True),
            )
        )
    )
    hidden = torch.randn(n, rows, 16, generator=generator)
    with torch.no_grad():
        monkeypatch.setattr(tree_attention, "ATTENTION_BLOCK", 64)
        blocked_tree = TreeAttention(depths, allowed)
        blocked = blocked_tree._attention(layer, hidden, 0)
        assert blocked_tree._block_plan  # the block path ran
        monkeypatch.setattr(tree_attention, "ATTENTION_BLOCK", 10_000)
        dense_tree = TreeAttention(depths, allowed)
        dense = dense_tree._attention(layer, hidden, 0)
        assert not dense_tree._block_plan
    torch.testing.assert_close(blocked, dense, rtol=1e-5, atol=1e-6)
