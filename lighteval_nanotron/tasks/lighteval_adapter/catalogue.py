"""lighteval's own catalogue of tasks, of the installed version, adapted.

- lighteval 0.11 keeps its tasks in `lighteval.tasks.default_tasks` (one module, each task under
  its suites: `lighteval|arc:easy`, `helm|mmlu:anatomy`, ...) and the tasks with custom logic in
  `lighteval.tasks.extended.<name>.main` (suite `extended`);
- lighteval 0.12 and 0.13 keep one module per task family in `lighteval.tasks.tasks` (a file, or a
  folder with `main.py`); 0.12.0's tasks still have suites, from 0.12.1 on they are named without one
  (`arc:easy`) and are registered here under the suite `lighteval` (`lighteval|arc:easy`), which is
  what results name them by.

Multilingual tasks (`lighteval.tasks.multilingual`) are read when asked for (`multilingual=True`),
as lighteval does, under the suite `multilingual`.

Each module is imported on its own: one that fails to import (a missing optional dependency, a
network call at import, ...) is reported by name with its error, and the others are read. A task
that cannot run here (an LLM judge, a scoring model, structured generation) is kept with the reason,
raised when a spec asks for it. A name that two modules define is refused (which one lighteval uses
depends on the order its file system lists them).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

from lighteval_nanotron.errors import ConfigError, CustomTasksError
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.lighteval_adapter.configs import adapt_task_config
from lighteval_nanotron.tasks.lighteval_adapter.installed import Lighteval, import_lighteval

CATALOGUE_SUITE = "lighteval"
"""The suite of lighteval 0.12.1+'s tasks here (they have none there)."""
MULTILINGUAL_SUITE = "multilingual"


@dataclass
class Catalogue:
    """lighteval's catalogue: the tasks that run here, those that cannot (`suite|name` -> why),
    and the modules that failed to import (module -> error)."""

    version: str
    configs: list[LightevalTaskConfig] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    suiteless: bool = False
    """lighteval 0.12.1+: tasks have no suite there, and its task strings ignore one."""
    multilingual: bool = False
    """Whether the multilingual tasks were read."""


def _modules_in(package: str, folder: Path) -> list[str]:
    """The task modules of a folder as lighteval's registry finds them: each `*.py` file, and each
    sub-folder with a `main.py` (sorted, where lighteval takes the file system's order)."""
    files = sorted(path.stem for path in folder.glob("*.py") if path.name != "__init__.py")
    folders = sorted(path.name for path in folder.iterdir() if path.is_dir() and (path / "main.py").is_file())
    return [f"{package}.{name}" for name in files] + [f"{package}.{name}.main" for name in folders]


def _task_modules(lighteval: Lighteval, multilingual: bool) -> list[tuple[str, str | None]]:
    """(module name, the suite its tasks get here or None for their own), in a fixed order."""
    package = lighteval.lighteval_task.__name__.rsplit(".", 1)[0]
    folder = Path(lighteval.lighteval_task.__file__).parent
    suite = CATALOGUE_SUITE if lighteval.suiteless else None
    multilingual_suite = MULTILINGUAL_SUITE if lighteval.suiteless else None
    if (folder / "tasks").is_dir():  # 0.12 and later: one module per task family
        modules = [(name, suite) for name in _modules_in(f"{package}.tasks", folder / "tasks")]
        if multilingual:
            names = _modules_in(f"{package}.multilingual.tasks", folder / "multilingual" / "tasks")
            modules += [(name, multilingual_suite) for name in names]
        return modules
    extended = [name for name in _modules_in(f"{package}.extended", folder / "extended") if name.endswith(".main")]
    modules = [(f"{package}.default_tasks", None), *((name, None) for name in extended)]
    if multilingual:
        modules.append((f"{package}.multilingual.tasks", None))
    return modules


def _configs_of(module: ModuleType, lighteval: Lighteval) -> list:
    """The lighteval task configs a catalogue module defines (its TASKS_TABLE, else its module-level configs)."""
    table = getattr(module, "TASKS_TABLE", None)
    values = table if table is not None else list(vars(module).values())
    return [value for value in values if isinstance(value, lighteval.lighteval_task.LightevalTaskConfig)]


def load_catalogue(multilingual: bool = False) -> Catalogue:
    """Read and adapt lighteval's catalogue (see the module docstring)."""
    lighteval = import_lighteval()
    catalogue = Catalogue(version=str(lighteval.version), suiteless=lighteval.suiteless, multilingual=multilingual)
    defined_in: dict[str, str] = {}
    by_key: dict[str, LightevalTaskConfig] = {}  # a config with several suites is one object under each key
    for module_name, suite in _task_modules(lighteval, multilingual):
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # one broken task module must not hide the others
            catalogue.unavailable[module_name] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            continue
        for config in _configs_of(module, lighteval):
            suites = [suite] if suite is not None else list(config.suite)
            keys = [f"{s}|{config.name}" for s in suites]
            twice = [key for key in keys if defined_in.get(key, module_name) != module_name]
            for key in twice:
                by_key.pop(key, None)
                catalogue.refused[key] = (
                    f"lighteval {lighteval.version} defines it in both {defined_in[key]} and {module_name}"
                )
            if twice:
                continue
            defined_in.update(dict.fromkeys(keys, module_name))
            try:
                ours = adapt_task_config(config, suite=suites)
            except (ConfigError, CustomTasksError) as error:
                for key in keys:  # in a module, the last definition of a name wins, as in lighteval
                    by_key.pop(key, None)
                    catalogue.refused[key] = str(error)
                continue
            for key in keys:
                by_key[key] = ours
                catalogue.refused.pop(key, None)
    suites_of: dict[int, list[str]] = {}
    for key, config in by_key.items():
        suites_of.setdefault(id(config), []).append(key.split("|", 1)[0])
    unique = {id(config): config for config in by_key.values()}
    catalogue.configs = [replace(config, suite=suites_of[ident]) for ident, config in unique.items()]
    return catalogue
