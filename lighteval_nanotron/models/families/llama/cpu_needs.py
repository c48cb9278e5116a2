"""What Nanotron's Llama needs to run on CPU with gloo (`enable_cpu_support()` applies it; docs/cpu.md).

- Its pipeline P2P makes its buffers on "cuda" (`llama.py:672`): the gloo-safe `CpuP2P` replaces it.
- `RotaryEmbedding.init_rotary_embeddings` (the table of 0.4's KV-cache path) asserts cuda
  (`llama.py:68-91`): the same table is built on the CPU.
- With the trainer, under current Nanotron (GitHub main): `LlamaForTraining.init_model_randomly`
  (llama.py:1095, commit 2411b02) hands `config.model` to a parametrizator that reads
  `config.model.init_method` and `config.parallelism` (the whole config, as Qwen2's passes it): every
  random-init Llama run fails with an AttributeError. On CPU it gets a view holding both
  (`_ModelArgsWithConfig`); on a GPU, start main's Llama runs from a checkpoint (docs/engine.md,
  "Nanotron versions").
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from lighteval_nanotron.models.families.base import CpuNeeds
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron


def cpu_needs() -> CpuNeeds:
    from nanotron.models import llama

    trainer_replaced = ()
    if installed_nanotron().name == "main":
        training_class = llama.LlamaForTraining
        whole_config = _with_whole_config(training_class.init_model_randomly)
        trainer_replaced = ((training_class, "init_model_randomly", whole_config),)
    return CpuNeeds(
        p2p_modules=(llama,),
        replaced=((llama.RotaryEmbedding, "init_rotary_embeddings", _init_rotary_embeddings_cpu),),
        trainer_replaced=trainer_replaced,
    )


def _init_rotary_embeddings_cpu(self: Any) -> None:
    """llama.RotaryEmbedding.init_rotary_embeddings (llama.py:68-91) with the buffer on the CPU."""
    if self._initialized_buffer:
        return
    freqs = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float)[: self.dim // 2] / self.dim))
    freqs = torch.outer(torch.arange(self.end), freqs).float()
    freqs = torch.view_as_real(torch.polar(torch.ones_like(freqs), freqs))
    self.register_buffer("freqs_cis", freqs.contiguous(), persistent=False)
    self._initialized_buffer = True


class _ModelArgsWithConfig:
    """`config.model` that also answers `.model` and `.parallelism` like the whole config."""

    def __init__(self, config):
        self.model, self.parallelism = config.model, config.parallelism

    def __getattr__(self, name):
        return getattr(self.model, name)


class _ConfigWithModelView:
    """The whole config, with `.model` a `_ModelArgsWithConfig`."""

    def __init__(self, config):
        self._config, self.model = config, _ModelArgsWithConfig(config)

    def __getattr__(self, name):
        return getattr(self._config, name)


def _with_whole_config(init_model_randomly):
    """main's `LlamaForTraining.init_model_randomly` called so that what it hands on is the whole config."""

    @functools.wraps(init_model_randomly)
    def wrapper(self, config):
        return init_model_randomly(self, config=_ConfigWithModelView(config))

    return wrapper
