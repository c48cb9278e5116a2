"""Registering a pure-PyTorch stand-in for a CUDA-only package under that package's module names.

The flash-attn and grouped_gemm stand-ins share one policy: never over a real package that can be
imported (unless forced: its kernels cannot take CPU tensors), on a machine without CUDA, and on
a CUDA machine only when asked for (an environment variable or `allow_on_gpu=True`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import torch

FALLBACK_MARKER = "__lighteval_nanotron_fallback__"


def is_stand_in(package: str) -> bool:
    """True when `package` in `sys.modules` is one of this project's stand-ins."""
    return getattr(sys.modules.get(package), FALLBACK_MARKER, False)


def real_package_available(package: str) -> bool:
    """True when a real (not stand-in) `package` can be imported."""
    if is_stand_in(package):
        return False
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def allowed_here(allow_on_gpu: bool | None, env_name: str) -> tuple[bool, str]:
    """(may a stand-in be installed on this machine, why)."""
    if not torch.cuda.is_available():
        return True, "no CUDA device"
    if allow_on_gpu is None:
        allow_on_gpu = os.environ.get(env_name, "") == "1"
    return allow_on_gpu, f"asked for ({env_name}=1 or allow_on_gpu=True)"


def announce(logger: logging.Logger, message: str, *args: Any) -> None:
    """Say that a stand-in is in use, once per process (each stand-in is installed once): a warning
    on a CUDA machine, where the real package would be faster (on local rank 0, the others at INFO);
    INFO where no CUDA device exists, since nothing else can run there (shown with --verbose)."""
    loud = torch.cuda.is_available() and os.environ.get("LOCAL_RANK", "0") == "0"
    logger.log(logging.WARNING if loud else logging.INFO, message, *args)


def _module(name: str, doc: str, attrs: Mapping[str, Any]) -> ModuleType:
    module = ModuleType(name, doc)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    module.__path__ = []
    setattr(module, FALLBACK_MARKER, True)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def register_stand_in(package: str, contents: Mapping[str, Mapping[str, Any]], doc: str) -> None:
    """Put modules named by `contents` (module name -> its attributes; `package` and all its parents
    included) into `sys.modules` in place of any `package` modules there, and point names that
    loaded `nanotron` modules took from the replaced package at the stand-in's objects."""
    modules = {name: _module(name, doc, attrs) for name, attrs in contents.items()}
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    replaced = [name for name in sys.modules if name == package or name.startswith(f"{package}.")]
    for name in replaced:
        del sys.modules[name]
    sys.modules.update(modules)
    if replaced:
        _rebind_nanotron(package, {key: value for attrs in contents.values() for key, value in attrs.items()})


def _rebind_nanotron(package: str, stand_ins: Mapping[str, Any]) -> None:
    """Loaded `nanotron` modules' attributes that came from the real `package` (functions, classes,
    submodules) get the stand-in object of the same name. Classes Nanotron derived from a real
    class keep their base: install the stand-in before importing Nanotron to avoid that."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "nanotron" or name.startswith("nanotron.")):
            continue
        for attr, value in list(vars(module).items()):
            origin = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
            if not isinstance(origin, str) or not (origin == package or origin.startswith(f"{package}.")):
                continue
            if isinstance(value, ModuleType) and value.__name__ in sys.modules:
                setattr(module, attr, sys.modules[value.__name__])
            elif getattr(value, "__name__", attr) in stand_ins:
                setattr(module, attr, stand_ins[getattr(value, "__name__", attr)])
