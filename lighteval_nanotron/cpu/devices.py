"""Run code that hard-codes `device="cuda"` on CPU.

`cuda_to_cpu()` is a `TorchFunctionMode` that rewrites every cuda device given to a torch call
(`torch.zeros(..., device="cuda")`, `tensor.to("cuda")`, `tensor.cuda()`) to the CPU while it is
active. `on_cpu(fn)` wraps a function (or a generator function) so that its body runs under it.
"""

import functools
import inspect
from typing import Any, Callable, TypeVar

import torch
from torch.overrides import TorchFunctionMode

F = TypeVar("F", bound=Callable[..., Any])
CPU = torch.device("cpu")
WRAPPED_MARKER = "__lighteval_nanotron_on_cpu__"


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.device) and value.type == "cuda":
        return CPU
    if isinstance(value, str) and (value == "cuda" or value.startswith("cuda:")):
        return CPU
    return value


class cuda_to_cpu(TorchFunctionMode):
    """While active, torch calls asked for a cuda device get the CPU instead."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]
        args = tuple(_to_cpu(arg) for arg in args)
        kwargs = {key: _to_cpu(value) for key, value in kwargs.items()}
        return func(*args, **kwargs)


def on_cpu(fn: F) -> F:
    """Wrap `fn` so that it runs under `cuda_to_cpu()`; generator functions stay generators."""
    if getattr(fn, WRAPPED_MARKER, False):
        return fn
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator_wrapper(*args, **kwargs):
            generator = fn(*args, **kwargs)
            while True:
                with cuda_to_cpu():
                    try:
                        item = next(generator)
                    except StopIteration as stop:
                        return stop.value
                yield item

        wrapper = generator_wrapper
    else:

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with cuda_to_cpu():
                return fn(*args, **kwargs)

    setattr(wrapper, WRAPPED_MARKER, True)
    return wrapper  # type: ignore[return-value]
