"""Task tables: the built-in ones (imported lazily) and user modules exposing `TASKS_TABLE`."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import CustomTasksError
from lighteval_nanotron.tasks.config import LightevalTaskConfig

logger = logging.getLogger(__name__)

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
    """The `TASKS_TABLE` of a module, checked."""
    table = getattr(module, "TASKS_TABLE", None)
    if table is None:
        raise CustomTasksError(
            f"{origin} has no TASKS_TABLE. Define TASKS_TABLE = [LightevalTaskConfig(...), ...] in it."
        )
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
    if type(item).__module__.split(".", 1)[0] != "lighteval":
        return item
    from lighteval_nanotron.tasks import lighteval_adapter

    return lighteval_adapter.adapt_task_config(item)


def _missing_lighteval(error: BaseException) -> bool:
    return isinstance(error, ModuleNotFoundError) and (error.name or "").split(".", 1)[0] == "lighteval"


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
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[module_name]
        if _missing_lighteval(error):
            raise CustomTasksError(
                f"Custom tasks file {str(path)!r} is written for lighteval, which is not installed: "
                "pip install 'lighteval-nanotron[lighteval]'"
            ) from error
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
        return importlib.import_module(str(custom_tasks))
    except Exception as error:
        raise CustomTasksError(
            f"Cannot import custom tasks module {str(custom_tasks)!r} ({type(error).__name__}: {error}). "
            "Pass a path to a .py file or the name of an importable module defining TASKS_TABLE."
        ) from error
