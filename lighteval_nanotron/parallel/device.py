"""The device this process runs Nanotron on: the CPU once CPU support is on (`enable_cpu_support()`,
which records it here with `enable_cpu_mode()`) or when there is no CUDA device, else CUDA. The
builder places models by it, and `build_parallel_context` refuses a machine without CUDA unless CPU
support is on."""

import torch

_CPU_MODE = False


def enable_cpu_mode() -> None:
    """Record that this process runs Nanotron on the CPU (called by `enable_cpu_support()`)."""
    global _CPU_MODE
    _CPU_MODE = True


def is_cpu_support_enabled() -> bool:
    """True once `enable_cpu_support()` has run in this process."""
    return _CPU_MODE


def default_device() -> torch.device:
    """Where a model built in this process goes: the CPU with CPU support or without CUDA, else CUDA."""
    if _CPU_MODE or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")
