"""An independent plain-PyTorch Llama forward over a TP1/PP1 Nanotron checkpoint, for correctness tests.

It reads the safetensors files directly (no Nanotron code) and computes what Nanotron 0.4's Llama
computes: RMSNorm, fused qkv (all q heads, then k, then v) with grouped-query attention, rotary
embeddings on interleaved pairs with theta 10000 (0.4 has no rope_theta; a config that records
`rope_theta` / `rope_interleaved`, as current Nanotron's does, gets those), causal softmax
attention, SiLU-gated MLP (fused gate then up), final norm, lm_head (tied to the embedding when
`tie_word_embeddings`). Everything in float64 by default, so it is a reference for fp32 and bf16.

    logits = reference_logits(checkpoint_path, input_ids)    # [batch, seq, vocab]
"""

import json
import re
from pathlib import Path
from typing import Dict, Union

import torch
from safetensors import safe_open

_FILE_NAME = re.compile(
    r"^model_(?P<param>\w+?)(_pp-rank-\d+-of-\d+_tp-rank-(?P<tp>\d+)-of-(?P<tp_size>\d+))?\.safetensors$"
)


def load_unsharded_weights(checkpoint: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """{"model.decoder.0.pp_block.attn.qkv_proj.weight": tensor, ...} from a checkpoint saved at TP1."""
    root = Path(checkpoint) / "model"
    weights: Dict[str, torch.Tensor] = {}
    for file in sorted(root.rglob("*.safetensors")):
        match = _FILE_NAME.match(file.name)
        if match is None:
            raise ValueError(f"Unexpected weight file name {file}")
        if match["tp_size"] not in (None, "1"):
            raise ValueError(f"{file} is TP-sharded: the reference reads checkpoints saved at TP1/PP1 only")
        name = ".".join(file.parent.relative_to(root).parts + (match["param"],))
        with safe_open(str(file), framework="pt") as handle:
            weights[name] = handle.get_tensor("data")
    return weights


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def _rotary(x: torch.Tensor, theta: float = 10000.0, interleaved: bool = True) -> torch.Tensor:
    """x [batch, seq, heads, dim]; rotate pairs by position * theta^(-2i/dim): consecutive pairs
    (2i, 2i+1) when `interleaved`, else (i, i + dim/2) (the two halves, as Hugging Face)."""
    _, seq, _, dim = x.shape
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq)
    rotation = torch.polar(torch.ones_like(angles), angles)[None, :, None, :]
    x64 = x.to(torch.float64)
    if not interleaved:
        halves = torch.complex(x64[..., : dim // 2], x64[..., dim // 2 :]) * rotation
        return torch.cat([halves.real, halves.imag], dim=-1).to(x.dtype)
    pairs = torch.view_as_complex(x64.reshape(*x.shape[:-1], dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * rotation).reshape(x.shape).to(x.dtype)


def _attention(x: torch.Tensor, w: Dict[str, torch.Tensor], prefix: str, config: dict) -> torch.Tensor:
    batch, seq, hidden = x.shape
    n_q, n_kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = hidden // n_q
    qkv = x @ w[f"{prefix}.qkv_proj.weight"].T
    q, k, v = qkv.split([n_q * head_dim, n_kv * head_dim, n_kv * head_dim], dim=-1)
    rope = dict(theta=float(config.get("rope_theta", 10000.0)), interleaved=bool(config.get("rope_interleaved", True)))
    q = _rotary(q.reshape(batch, seq, n_q, head_dim), **rope)
    k = _rotary(k.reshape(batch, seq, n_kv, head_dim), **rope)
    v = v.reshape(batch, seq, n_kv, head_dim)
    k = k.repeat_interleave(n_q // n_kv, dim=2)
    v = v.repeat_interleave(n_q // n_kv, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / head_dim**0.5
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(batch, seq, hidden)
    return out @ w[f"{prefix}.o_proj.weight"].T


def _mlp(x: torch.Tensor, w: Dict[str, torch.Tensor], prefix: str) -> torch.Tensor:
    gate, up = (x @ w[f"{prefix}.gate_up_proj.weight"].T).chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up) @ w[f"{prefix}.down_proj.weight"].T


@torch.no_grad()
def reference_logits(
    checkpoint: Union[str, Path], input_ids: torch.Tensor, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Full-vocabulary logits [batch, seq, vocab] (float32) for unpadded `input_ids` [batch, seq]."""
    config = json.loads((Path(checkpoint) / "model_config.json").read_text())
    w = {name: tensor.to(dtype) for name, tensor in load_unsharded_weights(checkpoint).items()}
    eps = config["rms_norm_eps"]
    embedding = w["model.token_position_embeddings.pp_block.token_embedding.weight"]
    x = embedding[input_ids]
    for layer in range(config["num_hidden_layers"]):
        block = f"model.decoder.{layer}.pp_block"
        x = x + _attention(_rms_norm(x, w[f"{block}.input_layernorm.weight"], eps), w, f"{block}.attn", config)
        x = x + _mlp(_rms_norm(x, w[f"{block}.post_attention_layernorm.weight"], eps), w, f"{block}.mlp")
    x = _rms_norm(x, w["model.final_layer_norm.pp_block.weight"], eps)
    lm_head = embedding if config["tie_word_embeddings"] else w["model.lm_head.pp_block.weight"]
    return (x @ lm_head.T).float()
