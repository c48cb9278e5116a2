"""Nanotron's checkpoint shapes under numpy 2 (0.4 and GitHub main, on every device).

Nanotron writes each saved shard's `unsharded_shape` into the safetensors metadata as
`str(tuple(shape))`. The fused projections (`qkv_proj`, `gate_up_proj`) get their sizes from
`numpy.cumsum` (`create_sharded_parameter_from_config`), and numpy 2 prints a numpy integer as
`np.int64(128)`, so the text becomes `(np.int64(128), 64)`. Nanotron 0.4 reads sizes with
`int(text)` and fails on it ("invalid literal for int()"); GitHub main reads it but writes it
too, so 0.4 and older tools cannot read main's saves.

`adapt_checkpoint_shapes()` (idempotent; `import_nanotron` calls it, so every way in through this
project has it) adapts `nanotron.serialize.metadata.TensorMetadata` when that module is imported
(at once if it already is):

- saves write plain integers, `(128, 64)`, whatever numpy prints;
- loads read both forms: plain integers (numpy 1 saves, older saves, saves made with this
  adaptation) and numpy 2's `np.<integer type>(N)` (saves made by an unadapted Nanotron under
  numpy 2). Any other text is refused with a message naming it.

The shard slices beside the shape (`local_global_slices_pairs`) are written with `str()`, which
prints a numpy integer as plain digits under numpy 1 and 2 alike: they need nothing.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import re
import sys
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Optional, Tuple

METADATA_MODULE = "nanotron.serialize.metadata"
_NUMPY_INTEGER = re.compile(r"(?:np|numpy)\.u?int(?:8|16|32|64)?\((-?\d+)\)")
_ADAPTED = "_lighteval_nanotron_numpy2"


def format_shape(shape: Iterable[int]) -> str:
    """The text Nanotron writes for a shape under numpy 1: `(128, 64)`, `(128,)`, `()`."""
    return str(tuple(int(size) for size in shape))


def parse_shape(text: str) -> Tuple[int, ...]:
    """Sizes from a written `unsharded_shape`: plain integers or numpy 2's `np.int64(128)`."""
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        raise ValueError(f"unsharded_shape {text!r} is not a tuple of sizes such as '(128, 64)'")
    sizes = []
    for part in (part.strip() for part in body[1:-1].split(",")):
        if not part:
            continue
        numpy_integer = _NUMPY_INTEGER.fullmatch(part)
        digits = numpy_integer.group(1) if numpy_integer else part
        if not digits.lstrip("-").isdigit():
            raise ValueError(f"unsharded_shape {text!r}: {part!r} is not an integer size")
        sizes.append(int(digits))
    return tuple(sizes)


def _adapt(metadata: ModuleType) -> None:
    import torch

    tensor_metadata = metadata.TensorMetadata
    if getattr(tensor_metadata, _ADAPTED, False):
        return
    config = tensor_metadata._metadata_config
    hooks = dict(config.type_hooks)
    hooks[Tuple[int, ...]] = lambda text: torch.Size(parse_shape(text))
    tensor_metadata._metadata_config = dataclasses.replace(config, type_hooks=hooks)

    write = tensor_metadata.to_str_dict

    def to_str_dict(self) -> dict:
        values = write(self)
        values["unsharded_shape"] = format_shape(self.unsharded_shape)
        return values

    tensor_metadata.to_str_dict = to_str_dict
    setattr(tensor_metadata, _ADAPTED, True)


class _AdaptingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _adapt(module)


class _AdaptingFinder(importlib.abc.MetaPathFinder):
    """Adapts `nanotron.serialize.metadata` as it is imported, by whoever imports it."""

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != METADATA_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _AdaptingLoader(spec.loader)
        return spec


def adapt_checkpoint_shapes() -> None:
    """Make Nanotron write plain-integer shapes and read both forms (see the module docstring)."""
    if METADATA_MODULE in sys.modules:
        _adapt(sys.modules[METADATA_MODULE])
    elif not any(isinstance(finder, _AdaptingFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AdaptingFinder())
