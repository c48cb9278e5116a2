"""Seeded sampling of next tokens from full-vocabulary fp32 logits.

A sampled token depends only on the row's logits and on `(seed, doc identity, sample index,
step)`: each row draws its noise from its own generator, seeded from those four, so batching,
the TP/PP layout and the data-parallel split do not change which token is drawn. The draw is
Gumbel-max (`argmax(logits / T + Gumbel noise)`, an exact sample of `softmax(logits / T)`),
after transformers' warpers in transformers' order: temperature, top-k (ties at the k-th value
kept), top-p (the smallest set of most likely tokens whose probability reaches `top_p`, at least
one token).
"""

from __future__ import annotations

import hashlib

import torch

from lighteval_nanotron.requests import GenerationParameters

_MASK64 = (1 << 64) - 1


def doc_seed(seed: int, task_name: str, doc_id: str, context: str, sample_index: int) -> int:
    """The 63-bit stream of one sample of one doc: stable across runs, layouts and task mixes."""
    key = "\x00".join((str(seed), task_name, doc_id, context, str(sample_index))).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def step_seed(stream: int, step: int) -> int:
    """splitmix64 of `(stream, step)`: distinct, decorrelated generator seeds per decoding step."""
    z = (stream + (step + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 1


def warped(logits: torch.Tensor, params: GenerationParameters) -> torch.Tensor:
    """`[vocab]` fp32 logits divided by the temperature, tokens outside top-k / top-p at -inf."""
    scores = logits.float() / float(params.temperature)
    if params.top_k:
        k = min(int(params.top_k), scores.shape[-1])
        kth = torch.topk(scores, k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p is not None and params.top_p < 1:
        ordered, order = torch.sort(scores, descending=True)
        cumulative = ordered.softmax(-1).cumsum(-1)
        drop = (cumulative - ordered.softmax(-1)) >= float(params.top_p)  # mass before the token already reaches p
        drop[0] = False
        scores = scores.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    return scores


def sample_token(logits: torch.Tensor, params: GenerationParameters, seed: int) -> int:
    """One token from `[vocab]` full-vocabulary logits, drawn with the generator seeded `seed`."""
    generator = torch.Generator().manual_seed(seed)
    uniform = torch.rand(logits.shape[-1], generator=generator, dtype=torch.float64)
    tiny = torch.finfo(torch.float64).tiny
    gumbel = -torch.log(-torch.log(uniform.clamp(min=tiny, max=1 - 1e-16)))
    scores = warped(logits.cpu(), params).double()
    return int(torch.argmax(scores + gumbel))
