"""Evaluation leaves modes, RNG streams and autograd as it found them."""

import random

import numpy as np
import torch

from lighteval_nanotron.hook.state_guard import preserve_training_state


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_restores_rng_modes_and_grad_mode():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
    model.train()
    model[2].eval()  # a submodule frozen in eval mode must stay so (no blanket train())
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    expected = _draws()
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    with preserve_training_state(model):
        assert not model.training and not model[0].training
        assert not torch.is_grad_enabled()
        out = model(torch.randn(3, 4))
        assert not out.requires_grad
        _draws(), torch.randn(100), np.random.rand(10), random.random()
    assert torch.is_grad_enabled()
    assert [m.training for m in model] == [True, True, False]
    assert _draws() == expected


def test_restores_after_an_exception():
    model = torch.nn.Linear(2, 2).train()
    torch.manual_seed(1)
    expected = torch.rand(1)
    torch.manual_seed(1)
    try:
        with preserve_training_state(model):
            torch.rand(5)
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert model.training and torch.equal(torch.rand(1), expected)


def test_restores_nanotron_random_states():
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()
    from nanotron.random import RandomStates, get_current_random_state

    states = RandomStates({"tp_synced": get_current_random_state()})
    before = states["tp_synced"]
    with preserve_training_state(torch.nn.Linear(1, 1), states):
        torch.manual_seed(123)
        states["tp_synced"] = get_current_random_state()
    assert states["tp_synced"] == before
