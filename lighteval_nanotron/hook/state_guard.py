"""Leave training exactly as evaluation found it: modes, RNG streams, autograd, memory."""

import contextlib
import copy
import gc
import random
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np
import torch


@dataclass(frozen=True)
class RngSnapshot:
    """Every global random stream a forward pass or a data loader may draw from."""

    python: Any
    numpy: Any
    torch_cpu: torch.Tensor
    torch_cuda: Optional[List[torch.Tensor]]

    @classmethod
    def take(cls) -> "RngSnapshot":
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        return cls(random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)

    def restore(self) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch_cpu)
        if self.torch_cuda is not None:
            torch.cuda.set_rng_state_all(self.torch_cuda)


def _module_modes(model: torch.nn.Module) -> List[Tuple[torch.nn.Module, bool]]:
    return [(module, module.training) for module in model.modules()]


@contextlib.contextmanager
def preserve_training_state(model: torch.nn.Module, nanotron_random_states: Any = None) -> Iterator[None]:
    """Run the body in eval mode under `no_grad`, then put everything back.

    Restores each module's own `training` flag (not a blanket `train()`), the Python, NumPy and
    torch CPU/CUDA generators, the trainer's Nanotron `RandomStates` (a dict of named generator
    states, deep-copied) when given, and the grad mode; then frees what the body left behind.
    """
    modes = _module_modes(model)
    rng = RngSnapshot.take()
    saved_random_states = copy.deepcopy(nanotron_random_states) if nanotron_random_states is not None else None
    try:
        model.eval()
        with torch.no_grad():
            yield
    finally:
        for module, was_training in modes:
            module.training = was_training
        rng.restore()
        if saved_random_states is not None:
            _restore_nanotron_random_states(nanotron_random_states, saved_random_states)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _restore_nanotron_random_states(live: Any, saved: Any) -> None:
    """Nanotron's `RandomStates` is a `MutableMapping[str, RandomState]`: put the saved values back in place."""
    for name in list(live.keys()):
        live[name] = saved[name]
