"""The installed lighteval: its version, checked, and the few modules of it the adapter uses.

Only `lighteval.tasks.lighteval_task`, `lighteval.tasks.requests`, `lighteval.models.model_output`,
`lighteval.metrics.metrics` (with the metric classes it imports) are imported: lighteval's registry
would import every task of its catalogue, some of which fail to import or reach the network.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import io
from dataclasses import dataclass
from types import ModuleType

from packaging.version import Version

from lighteval_nanotron.console_errors import is_verbose
from lighteval_nanotron.errors import CustomTasksError

INSTALL_HINT = "pip install 'lighteval-nanotron[lighteval]'"
SUPPORTED = (Version("0.11"), Version("0.14"))
"""lighteval releases whose task files and catalogue are read: 0.11 <= version < 0.14."""
SUPPORTED_TEXT = "0.11 to 0.13"


def installed_version() -> Version | None:
    """The installed lighteval's version, read without importing it (None when not installed)."""
    if importlib.util.find_spec("lighteval") is None:
        return None
    try:
        return Version(importlib.metadata.version("lighteval"))
    except importlib.metadata.PackageNotFoundError:
        return None


def check_version(version: Version | None) -> Version:
    """`version` when this project reads lighteval files of it, else one CustomTasksError naming the fix."""
    if version is None:
        raise CustomTasksError(f"lighteval is not installed; install it with: {INSTALL_HINT}")
    low, high = SUPPORTED
    if not low <= version < high:
        raise CustomTasksError(
            f"lighteval {version} is installed; this project reads the task files and catalogue of lighteval "
            f"{SUPPORTED_TEXT}: {INSTALL_HINT} (installs the newest of them)."
        )
    return version


def has_suites(config_class: type) -> bool:
    """Whether lighteval's `LightevalTaskConfig` has a `suite` field (up to 0.12.0; 0.12.1 removed it)."""
    return "suite" in {field.name for field in dataclasses.fields(config_class)}


@dataclass(frozen=True)
class Lighteval:
    """The installed lighteval: its version and the modules the adapter reads."""

    version: Version
    lighteval_task: ModuleType
    requests: ModuleType
    model_output: ModuleType
    metrics: ModuleType
    metric_utils: ModuleType
    metrics_sample: ModuleType

    @property
    def suiteless(self) -> bool:
        """lighteval 0.12.1+: tasks are named without a suite (`task|k`) and its task strings ignore one."""
        return not has_suites(self.lighteval_task.LightevalTaskConfig)


_LOADED: Lighteval | None = None


def quiet_nltk_downloads() -> None:
    """Unless verbose, nltk's downloads report nothing. lighteval's metric and task modules call
    `nltk.download(...)` when they are imported; without network each call prints its failure
    (four `[nltk_data]` lines) whatever `quiet` says. Nothing else changes: a metric that needs
    the missing data still fails, with nltk's own message, when it runs."""
    if is_verbose():
        return
    try:
        import nltk
    except ImportError:
        return
    if not isinstance(nltk.download, functools.partial):
        nltk.download = functools.partial(nltk.download, quiet=True, print_error_to=io.StringIO())


def import_lighteval() -> Lighteval:
    """The installed lighteval, checked (CustomTasksError naming the extra to install otherwise)."""
    global _LOADED
    if _LOADED is None:
        version = check_version(installed_version())
        quiet_nltk_downloads()  # before lighteval's modules bind `nltk.download`
        names = {
            "lighteval_task": "lighteval.tasks.lighteval_task",
            "requests": "lighteval.tasks.requests",
            "model_output": "lighteval.models.model_output",
            "metrics": "lighteval.metrics.metrics",
            "metric_utils": "lighteval.metrics.utils.metric_utils",
            "metrics_sample": "lighteval.metrics.metrics_sample",
        }
        try:
            modules = {key: importlib.import_module(name) for key, name in names.items()}
        except ImportError as error:
            raise CustomTasksError(
                f"lighteval {version} is installed but cannot be imported ({type(error).__name__}: {error}); "
                f"reinstall it with: {INSTALL_HINT}"
            ) from error
        _LOADED = Lighteval(version=version, **modules)
    return _LOADED


def is_lighteval_object(obj: object) -> bool:
    """True for an instance of one of lighteval's own classes, or of a class derived from one
    (checked without importing lighteval)."""
    return any(cls.__module__.split(".", 1)[0] == "lighteval" for cls in type(obj).__mro__)
