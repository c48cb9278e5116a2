"""Make Nanotron importable (0.4, or current GitHub main).

Current Nanotron imports flash-attn and grouped_gemm (CUDA-only packages) from `nanotron.config`
on: `import_nanotron` first makes them importable (`ensure_cuda_extensions`: the real packages, or
the stand-ins where their policy allows, e.g. on a machine without CUDA).

The 0.4 wheel has an import cycle: `nanotron/logging.py:38` imports `LoggingArgs` from
`nanotron.config.config`, which (through `config.lighteval_config` -> `parallelism_config` ->
`utils_config` -> the pipeline engine) imports `nanotron.logging` again before `LoggingArgs`
exists. `LoggingArgs` is only a type annotation in `nanotron.logging`, so a placeholder that
exists while `nanotron.config.config` runs breaks the cycle; the real class replaces it afterwards.
Loading `nanotron.config` first also avoids the second cycle (models -> pipeline engine -> optim ->
parallel.parameters -> models).

`import_nanotron` also adapts Nanotron's checkpoint shapes to numpy 2 (`nanotron_compat.numpy2`),
whichever device runs.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Optional, Sequence

from lighteval_nanotron.nanotron_compat.console import quiet_nanotron
from lighteval_nanotron.nanotron_compat.flash_attn_fallback import ensure_flash_attn
from lighteval_nanotron.nanotron_compat.grouped_gemm_fallback import ensure_grouped_gemm
from lighteval_nanotron.nanotron_compat.numpy2 import adapt_checkpoint_shapes
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron, require_supported_nanotron

_CONFIG_MODULE = "nanotron.config.config"


class _LoggingArgsPlaceholder:
    """Stands in for `LoggingArgs` while `nanotron.config.config` is being executed."""


class _PreseedLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.LoggingArgs = _LoggingArgsPlaceholder
        self._loader.exec_module(module)


class _PreseedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != _CONFIG_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PreseedLoader(spec.loader)
        return spec


def ensure_cuda_extensions() -> None:
    """flash-attn, and grouped_gemm where the installed Nanotron imports it (GitHub main), importable
    before Nanotron's models are: the real packages, or the stand-ins (ConfigError on a CUDA machine
    without them unless asked for; see `ensure_flash_attn`, `ensure_grouped_gemm`)."""
    ensure_flash_attn()
    if installed_nanotron().name == "main":
        ensure_grouped_gemm()


def import_nanotron() -> ModuleType:
    """Import Nanotron's config and logging modules in an order that works; idempotent.

    Call it before importing any other `nanotron` module. Returns the `nanotron.config` module.
    Raises UnsupportedModelError for a Nanotron variant the project does not support
    (`nanotron_compat.variant`). Checkpoint shapes are adapted to numpy 2 (`adapt_checkpoint_shapes`),
    also when Nanotron was imported before.
    """
    adapt_checkpoint_shapes()
    if _CONFIG_MODULE in sys.modules and "nanotron.logging" in sys.modules:
        return importlib.import_module("nanotron.config")
    if require_supported_nanotron().name == "main":
        ensure_cuda_extensions()
    finder = _PreseedFinder()
    sys.meta_path.insert(0, finder)
    try:
        config = importlib.import_module("nanotron.config")
    finally:
        sys.meta_path.remove(finder)
    nanotron_logging = importlib.import_module("nanotron.logging")
    nanotron_logging.LoggingArgs = sys.modules[_CONFIG_MODULE].LoggingArgs
    quiet_nanotron()
    return config


def import_nanotron_models() -> ModuleType:
    """`import_nanotron()`, with flash-attn importable before any of Nanotron's model modules is:
    Nanotron 0.4's `models/llama.py` and `nn/layer_norm.py` import it at module level (current
    Nanotron already needs it for `nanotron.config`, which `import_nanotron` sees to). The real
    package, or the stand-in where its policy allows (`ensure_cuda_extensions`): so a GPU process
    that never enables CPU support (the engine on CUDA, `eval`, the benchmark) can build a model.
    Raises ConfigError on a CUDA machine without flash-attn unless the stand-in is asked for
    (`LIGHTEVAL_NANOTRON_FLASH_ATTN_FALLBACK=1`). Returns the `nanotron.config` module."""
    config = import_nanotron()
    ensure_cuda_extensions()
    return config


def import_nanotron_trainer(with_wandb: bool = True, with_data_libraries: bool = True) -> ModuleType:
    """`nanotron.trainer` (the model builder needs its `mark_tied_parameters`); idempotent.

    It imports `wandb` when installed (a second or more) only to log training scalars, and (0.4,
    through `nanotron.dataloader`) `datasets` and `transformers` (0.6 s of CPU) only for its
    training dataloaders. A process that evaluates and never trains passes `with_wandb=False`
    and `with_data_libraries=False`: those not imported yet then look absent while
    `nanotron.trainer` is imported (its `wandb` is None for this process); they stay importable
    for anything else (our W&B logger and dataset loading import them themselves), and
    `nanotron.dataloader`, imported without them, is dropped so that a later import of it runs
    whole.
    """
    import_nanotron_models()  # nanotron.trainer imports the models (flash-attn)
    if "nanotron.trainer" in sys.modules:
        return sys.modules["nanotron.trainer"]
    wanted = {"wandb": with_wandb, "datasets": with_data_libraries, "transformers": with_data_libraries}
    hidden = [name for name, keep in wanted.items() if not keep and name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Datasets and/or Transformers not installed")
            trainer = importlib.import_module("nanotron.trainer")
    finally:
        for name in hidden:
            sys.modules.pop(name, None)
    if {"datasets", "transformers"} & set(hidden):
        sys.modules.pop("nanotron.dataloader", None)
        vars(sys.modules["nanotron"]).pop("dataloader", None)
    quiet_nanotron()  # its bars, now that the modules drawing them are imported
    return trainer
