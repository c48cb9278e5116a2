"""Importing a task file written for lighteval 0.11 to 0.13 under whichever of them is installed.

Later lighteval releases removed fields of 0.11's `LightevalTaskConfig` (`suite` in 0.12.1,
`trust_dataset` and `truncate_fewshots`), so under 0.13 a file written for 0.11
(`LightevalTaskConfig(..., suite=["custom"], trust_dataset=True)`) fails in lighteval's own
constructor. While this project imports a task file (`importing_task_file()`), lighteval's
`LightevalTaskConfig`, when it lacks any of them, is a subclass of itself that also takes them (with
0.11's defaults), so the file runs unchanged; lighteval's class is put back afterwards. Nothing is
imported from lighteval unless the file imports it.

Files written for lighteval 0.10 (`LightevalTaskConfig(metric=...)`, `Metrics.loglikelihood_acc_norm`
and the other metric names 0.11 removed) are not read: lighteval 0.11 changed that API and no
lighteval that this project reads accepts them. `explain_import_error` turns the error of such a
file, and of files using modules a later lighteval removed, into one line naming the change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, Optional

from lighteval_nanotron.tasks.lighteval_adapter.installed import (
    SUPPORTED_TEXT,
    check_version,
    installed_version,
)

TASK_MODULE = "lighteval.tasks.lighteval_task"
V011_FIELDS: dict[str, Any] = {"suite": ("custom",), "trust_dataset": False, "truncate_fewshots": False}
"""lighteval 0.11's config fields that later versions removed, with 0.11's defaults."""


def missing_v011_fields(config_class: type) -> list[str]:
    """The fields of `V011_FIELDS` that lighteval's `LightevalTaskConfig` does not have."""
    have = {field.name for field in dataclasses.fields(config_class)}
    return [name for name in V011_FIELDS if name not in have]


def config_with_v011_fields(base: type) -> type:
    """lighteval's `LightevalTaskConfig` (0.12+) that also takes 0.11's `suite`, `trust_dataset` and
    `truncate_fewshots` (those it lacks), with 0.11's defaults."""
    added = [
        (name, Any, dataclasses.field(default_factory=lambda default=V011_FIELDS[name]: _fresh(default)))
        for name in missing_v011_fields(base)
    ]
    config = dataclasses.make_dataclass("LightevalTaskConfig", added, bases=(base,))
    config.__doc__ = f"lighteval's LightevalTaskConfig with lighteval 0.11's {', '.join(n for n, _, _ in added)}."
    config.__module__ = __name__
    return config


def _fresh(default: Any) -> Any:
    return list(default) if isinstance(default, tuple) else default


class _Swap:
    """Puts the `suite`-taking config into lighteval's task module, and back."""

    def __init__(self) -> None:
        self.originals: dict[ModuleType, type] = {}

    def apply(self, module: ModuleType) -> None:
        if module in self.originals or not missing_v011_fields(module.LightevalTaskConfig):
            return
        original = module.LightevalTaskConfig
        self.originals[module] = original
        module.LightevalTaskConfig = config_with_v011_fields(original)

    def restore(self) -> None:
        for module, original in self.originals.items():
            module.LightevalTaskConfig = original


class _SwapLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, swap: _Swap):
        self._loader, self._swap = loader, swap

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._swap.apply(module)


class _SwapFinder(importlib.abc.MetaPathFinder):
    def __init__(self, swap: _Swap):
        self._swap = swap

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != TASK_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _SwapLoader(spec.loader, self._swap)
        return spec


@contextlib.contextmanager
def importing_task_file() -> Iterator[None]:
    """While a task file is imported, lighteval's `LightevalTaskConfig` takes `suite` in every version read."""
    version = installed_version()
    try:
        wanted = version is not None and check_version(version) is not None
    except ImportError:  # an unsupported lighteval: its own classes, refused when a config is adapted
        wanted = False
    if not wanted:
        yield
        return
    swap = _Swap()
    finder = _SwapFinder(swap)
    sys.meta_path.insert(0, finder)
    if TASK_MODULE in sys.modules:
        swap.apply(sys.modules[TASK_MODULE])
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        swap.restore()


def explain_import_error(error: BaseException) -> str | None:
    """Why a task file written for another lighteval fails under the installed one, in one line
    naming the fix; None when the error is not one of those."""
    version = installed_version()
    text = str(error)
    if isinstance(error, TypeError) and "unexpected keyword argument 'metric'" in text:
        return (
            "it is written for lighteval 0.10 (LightevalTaskConfig(metric=...)), whose API lighteval 0.11 changed; "
            f"this project reads lighteval {SUPPORTED_TEXT} files: rename metric= to metrics= (and 0.10's metric names "
            "such as Metrics.loglikelihood_acc_norm to 0.11's, e.g. Metrics.loglikelihood_acc(sample_params="
            '{"logprob_normalization": LogProbCharNorm()}))'
        )
    if isinstance(error, AttributeError) and "Metrics" in text:
        return (
            f"it names a lighteval metric that lighteval {version} does not have ({text}); lighteval 0.11 renamed "
            "0.10's metrics (loglikelihood_acc_norm is Metrics.loglikelihood_acc(sample_params="
            "{'logprob_normalization': LogProbCharNorm()})) and 0.12 renamed avg_at_k/maj_at_k to "
            "avg_at_n/maj_at_n: use the installed lighteval's names"
        )
    if isinstance(error, ModuleNotFoundError) and (error.name or "").startswith("lighteval."):
        return (
            f"it imports {error.name}, which lighteval {version} does not have (lighteval 0.12 moved the task "
            "definitions to lighteval/tasks/tasks/<task>.py and 0.13 removed lighteval.tasks.default_prompts: "
            "import the prompt function from the task's module, or define it in the file)"
        )
    if isinstance(error, TypeError) and "unexpected keyword argument" in text and "LightevalTaskConfig" in text:
        return (
            f"it passes a field that lighteval {version}'s LightevalTaskConfig does not have ({text}); it may be "
            f"written for another lighteval: this project reads lighteval {SUPPORTED_TEXT} files"
        )
    return None
