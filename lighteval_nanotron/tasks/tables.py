"""Task tables: the built-in ones (imported lazily) and user modules exposing `TASKS_TABLE`."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import CustomTasksError
from lighteval_nanotron.tasks.config import LightevalTaskConfig

logger = logging.getLogger(__name__)

_IMPORTS_LIGHTEVAL = re.compile(r"^\s*(?:from|import)\s+lighteval(?:\.|\s|$)", re.MULTILINE)

CORE_SUITES = ["helm", "bigbench", "harness", "leaderboard", "lighteval", "original", "extended", "custom", "test"]
OPTIONAL_SUITES = ["community", "multilingual"]
DEFAULT_SUITES = CORE_SUITES + OPTIONAL_SUITES

DEFAULT_TABLE_MODULE = "lighteval_nanotron.tasks.default_tasks"
SUITE_TABLE_MODULES = {
    "extended": "lighteval_nanotron.tasks.extended",
    "community": "lighteval_nanotron.tasks.community",
    "multilingual": "lighteval_nanotron.tasks.multilingual",
}


def import_table_module(module_name: str) -> ModuleType | None:
    """Import a built-in table module; None if that module does not exist (yet)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            logger.debug("Task table %s is not available: %s", module_name, error)
            return None
        raise


def table_of(module: ModuleType, origin: str) -> list[LightevalTaskConfig]:
    """The `TASKS_TABLE` of a module, checked; configs written for lighteval are adapted."""
    table = getattr(module, "TASKS_TABLE", None)
    if table is None:
        raise CustomTasksError(
            f"{origin} has no TASKS_TABLE. Define TASKS_TABLE = [LightevalTaskConfig(...), ...] in it."
        )
    from lighteval_nanotron.tasks.lighteval_adapter.installed import is_lighteval_object

    written_for_lighteval = [item for item in table if is_lighteval_object(item)]
    if written_for_lighteval:
        _note_inspect_only_fields(written_for_lighteval, origin)
    table = [_adapted(item) for item in table]
    bad = [type(item).__name__ for item in table if not isinstance(item, LightevalTaskConfig)]
    if bad:
        raise CustomTasksError(
            f"TASKS_TABLE of {origin} must hold LightevalTaskConfig objects (from lighteval_nanotron.tasks), "
            f"found {', '.join(sorted(set(bad)))}."
        )
    return table


def _adapted(item: Any) -> Any:
    """A task config written for lighteval itself, mapped onto this project's (other items unchanged)."""
    from lighteval_nanotron.tasks import lighteval_adapter

    if not lighteval_adapter.is_lighteval_object(item):
        return item

    return lighteval_adapter.adapt_task_config(item)


def _note_inspect_only_fields(configs: list[Any], origin: str) -> None:
    from lighteval_nanotron.tasks import lighteval_adapter

    found = {config.name: lighteval_adapter.inspect_only_fields(config) for config in configs}
    found = {name: fields for name, fields in found.items() if fields}
    if found:
        fields = sorted({field for names in found.values() for field in names})
        logger.warning(
            "%s: lighteval's inspect-ai field(s) %s are ignored (tasks %s): they define lighteval's inspect-ai "
            "evaluation (`lighteval eval`); here, as in lighteval's accelerate, vLLM and Nanotron backends, the "
            "prompt function and metrics define what is evaluated.",
            origin,
            ", ".join(fields),
            ", ".join(sorted(found)),
        )


def _lighteval_reason(error: BaseException, source: str | None) -> str | None:
    """Why a task file needing lighteval cannot be read: lighteval not installed, or the file is
    written for a lighteval version the installed one does not read (None for other errors)."""
    from lighteval_nanotron.tasks import lighteval_adapter

    missing = isinstance(error, ModuleNotFoundError) and (error.name or "").split(".", 1)[0] == "lighteval"
    if missing and lighteval_adapter.installed_version() is None:
        return f"it is written for lighteval, which is not installed: {lighteval_adapter.INSTALL_HINT}"
    if source is None or not _IMPORTS_LIGHTEVAL.search(source):
        return None

    reason = lighteval_adapter.explain_import_error(error)
    return f"it cannot be read with the installed lighteval: {reason}" if reason else None


def _source_of(spec: Any) -> str | None:
    try:
        return spec.loader.get_source(spec.name)
    except Exception:  # no source (a compiled or namespace module): nothing to explain from
        return None


def _exec_task_module(load: Any) -> ModuleType:
    """Run `load()` (which imports a task module) so that lighteval task files of any version
    this project reads import under the installed lighteval (`lighteval_adapter.task_files`)."""
    from lighteval_nanotron.tasks.lighteval_adapter.task_files import importing_task_file

    with importing_task_file():
        return load()


def task_groups_of(module: ModuleType) -> dict[str, list[str]]:
    """`TASKS_GROUPS` of a module: group name -> list of specs (comma strings are split)."""
    groups: dict[str, Any] = getattr(module, "TASKS_GROUPS", None) or {}
    return {
        name: [s.strip() for s in (value.split(",") if isinstance(value, str) else value) if s.strip()]
        for name, value in groups.items()
    }


def _import_file(path: Path) -> ModuleType:
    # A unique, stable module name so that two files named alike do not clash and so that the
    # module's functions and classes pickle by reference inside this process.
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    module_name = f"lighteval_nanotron_custom_tasks_{path.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CustomTasksError(f"Cannot import custom tasks file {str(path)!r}: not a Python file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        _exec_task_module(lambda: spec.loader.exec_module(module))
    except Exception as error:
        del sys.modules[module_name]
        reason = _lighteval_reason(error, _source_of(spec))
        if reason:
            raise CustomTasksError(f"Custom tasks file {str(path)!r}: {reason}.") from error
        raise CustomTasksError(
            f"Custom tasks file {str(path)!r} failed to import ({type(error).__name__}: {error}). "
            "Fix the error in that file; it must define TASKS_TABLE."
        ) from error
    return module


def create_custom_tasks_module(custom_tasks: str | os.PathLike | ModuleType) -> ModuleType:
    """The module holding custom tasks, from a `.py` path, an importable module name or a module."""
    if isinstance(custom_tasks, ModuleType):
        return custom_tasks
    path = Path(custom_tasks)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise CustomTasksError(f"Custom tasks file {str(path)!r} does not exist; pass a .py file or a module name.")
        return _import_file(path)
    try:
        return _exec_task_module(lambda: importlib.import_module(str(custom_tasks)))
    except Exception as error:
        reason = _lighteval_reason(error, _source_of(importlib.util.find_spec(str(custom_tasks))))
        if reason:
            raise CustomTasksError(f"Custom tasks module {str(custom_tasks)!r}: {reason}.") from error
        raise CustomTasksError(
            f"Cannot import custom tasks module {str(custom_tasks)!r} ({type(error).__name__}: {error}). "
            "Pass a path to a .py file or the name of an importable module defining TASKS_TABLE."
        ) from error
