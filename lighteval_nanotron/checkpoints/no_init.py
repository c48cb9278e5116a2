"""Build modules without drawing random initial weights, for a model whose weights are loaded next.

`nn.Linear` and `nn.Embedding` (and Nanotron's tensor-parallel versions of them) draw their
initial weights with `torch.nn.init` when built: about 3 s for SmolLM2-135M on two busy cores,
thrown away by the checkpoint load that follows. Inside `random_init_skipped()` those draws
leave the (uninitialised) tensors as they are; constant initialisations (`ones_`, `zeros_`)
still run. Only for models whose every weight is then loaded: `load_checkpoint_weights` checks
first that the checkpoint holds every weight of the model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

RANDOM_INITS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "xavier_uniform_",
    "xavier_normal_",
    "orthogonal_",
)


def _left_as_is(tensor: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
    return tensor


@contextlib.contextmanager
def random_init_skipped() -> Iterator[None]:
    """`torch.nn.init`'s random draws do nothing while this is active (restored on exit)."""
    saved = {name: getattr(torch.nn.init, name) for name in RANDOM_INITS}
    try:
        for name in RANDOM_INITS:
            setattr(torch.nn.init, name, _left_as_is)
        yield
    finally:
        for name, function in saved.items():
            setattr(torch.nn.init, name, function)
