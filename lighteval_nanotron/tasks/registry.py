"""`Registry`: every known task config under `suite|name`, and task specs resolved against them.

Order is always the order of the specs (then sorted names inside a superset), never a hash
order, so every rank of a distributed run builds the same task list.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import logging
from collections.abc import Iterable
from itertools import groupby
from pathlib import Path
from types import ModuleType
from typing import Any

from lighteval_nanotron.errors import CustomTasksError, LightevalNanotronError, TaskSpecError, UnknownTaskError
from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.tasks import tables
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.early_signal import BUILTIN_TASK_GROUPS
from lighteval_nanotron.tasks.lighteval_task import LightevalTask
from lighteval_nanotron.tasks.spec import TaskSpec, parse_task_spec, read_task_list
from lighteval_nanotron.tasks.tables import CORE_SUITES, DEFAULT_SUITES, SUITE_TABLE_MODULES

logger = logging.getLogger(__name__)

LIGHTEVAL_CATALOGUE = "lighteval catalogue"
CATALOGUE_MULTILINGUAL = "multilingual"


def _accepts(metric: Any, param: str, value: Any) -> bool:
    """Whether `metric` takes the sample parameter `param`."""
    sample_fn = getattr(metric, "sample_level_fn", None)
    if dataclasses.is_dataclass(sample_fn) and not isinstance(sample_fn, type):
        return param in {f.name for f in dataclasses.fields(sample_fn) if f.init}
    if sample_fn is not None:
        return hasattr(sample_fn, param) and not callable(getattr(sample_fn, param))
    try:
        copy.deepcopy(metric)(sample_params={param: value})
    except (TypeError, ValueError, KeyError, AttributeError, LightevalNanotronError):
        return False
    return True


def parametrize_metrics(metrics: Iterable[Any], params: dict[str, Any], where: str) -> list[Any]:
    """Apply `@param=value`s to the metrics that accept them; every parameter must find one."""
    metrics = list(metrics)
    if not params:
        return metrics
    used: set[str] = set()
    result = []
    for metric in metrics:
        accepted = {name: value for name, value in params.items() if _accepts(metric, name, value)}
        used.update(accepted)
        try:
            result.append(copy.deepcopy(metric)(sample_params=accepted) if accepted else metric)
        except LightevalNanotronError as error:  # an invalid value (pass@k with n < k): say which task
            raise TaskSpecError(f"{where}: {error}") from error
    unused = [name for name in params if name not in used]
    if unused:
        names = ", ".join(str(getattr(m, "metric_name", m)) for m in metrics) or "none"
        raise TaskSpecError(
            f"{where}: no metric of the task accepts parameter(s) {', '.join(unused)} (metrics: {names}). "
            "Remove the @param=value part or use a metric that takes it."
        )
    return result


EXTRA_METRICS = "extra_metrics"
"""Spec parameter adding built-in metrics to a task: `suite|task@extra_metrics=gold_bpb+gold_margin|k`."""


def extra_metrics(names: Any, metrics: Iterable[Any], where: str) -> list[Any]:
    """The `Metrics` entries named in `@extra_metrics=a+b`; a name unknown or whose result key the
    task already has is refused (the results would collide)."""
    if names is None:
        return []

    keys = {name for metric in metrics for name in getattr(metric, "metric_names", [])}
    added = []
    for name in (part.strip() for part in str(names).split("+")):
        if name not in Metrics:
            known = ", ".join(Metrics)
            raise TaskSpecError(f"{where}: unknown metric {name!r} in @{EXTRA_METRICS}=. Known metrics: {known}.")
        metric = Metrics[name]
        clash = keys.intersection(metric.metric_names)
        if clash:
            raise TaskSpecError(
                f"{where}: the task already has a metric with result key {sorted(clash)[0]!r}; "
                f"remove {name!r} from @{EXTRA_METRICS}=."
            )
        keys.update(metric.metric_names)
        added.append(metric)
    return added


class Registry:
    """Holds every task config (`suite|name` -> config) and resolves task specs into tasks."""

    def __init__(
        self,
        tasks: str | Path | list[str] | None = None,
        custom_tasks: str | Path | ModuleType | None = None,
        load_community: bool = False,
        load_extended: bool = False,
        load_multilingual: bool = False,
    ):
        self._custom_tasks = custom_tasks
        self._custom_module = tables.create_custom_tasks_module(custom_tasks) if custom_tasks is not None else None
        custom_groups = tables.task_groups_of(self._custom_module) if self._custom_module else {}
        self._task_groups = {**BUILTIN_TASK_GROUPS, **custom_groups}
        self._loaded_suites: set[str] = set()
        self._task_registry: dict[str, LightevalTaskConfig] = {}
        self._tables: dict[str, list[LightevalTaskConfig]] = {}  # "default" or an optional suite -> table
        self._custom_table: list[LightevalTaskConfig] = []
        self._catalogue: Any = None  # lighteval_adapter.Catalogue, loaded on demand, lowest priority
        self._catalogue_error: str | None = None  # why it could not be loaded (not tried again)
        optional = {"community": load_community, "extended": load_extended, "multilingual": load_multilingual}
        self._load_full_registry([suite for suite, wanted in optional.items() if wanted])
        self.tasks_list: list[str] = self._get_full_task_list_from_input_string(tasks) if tasks is not None else []
        self._specs = [parse_task_spec(spec, self._known_suites()) for spec in self.tasks_list]
        self._load_suites([spec.suite for spec in self._specs if spec.suite in SUITE_TABLE_MODULES])
        self._configs = self._configs_from_specs(self._specs)
        self.task_to_configs: dict[str, list[LightevalTaskConfig]] = {}
        for config in self._configs:
            self.task_to_configs.setdefault(f"{config.suite[0]}|{config.name}", []).append(config)

    # ----- building the registry -----

    def _get_full_task_list_from_input_string(self, tasks: str | Path | list[str]) -> list[str]:
        """Specs from a comma list, a file or a list, task groups expanded, duplicates dropped."""
        specs: list[str] = []
        for spec in read_task_list(tasks):
            specs.extend(self._task_groups.get(spec, [spec]))
        return list(dict.fromkeys(specs))

    def _known_suites(self) -> list[str]:
        suites = dict.fromkeys(DEFAULT_SUITES)
        for config in self._task_registry.values():
            suites.update(dict.fromkeys(config.suite))
        return list(suites)

    def _load_full_registry(self, optional_suites: list[str]) -> None:
        """Tables in priority order: core, optional suites, then custom tasks (which win)."""
        default = tables.import_table_module(tables.DEFAULT_TABLE_MODULE)
        if default is not None:
            self._tables["default"] = tables.table_of(default, tables.DEFAULT_TABLE_MODULE)
        if self._custom_module is not None:
            origin = getattr(self._custom_module, "__file__", None) or self._custom_module.__name__
            self._custom_table = tables.table_of(self._custom_module, f"custom tasks {origin}")
        self._load_suites(optional_suites)
        self._rebuild()

    def _load_suites(self, suites: Iterable[str | None]) -> None:
        added = False
        for suite in suites:
            if suite is None or suite in self._loaded_suites or suite not in SUITE_TABLE_MODULES:
                continue
            self._loaded_suites.add(suite)
            module = tables.import_table_module(SUITE_TABLE_MODULES[suite])
            if module is None:
                logger.info("The %s suite is not available in this installation.", suite)
                continue
            self._tables[suite] = tables.table_of(module, SUITE_TABLE_MODULES[suite])
            added = True
        if added:
            self._rebuild()

    def _load_lighteval_catalogue(self, multilingual: bool = False) -> bool:
        """Add lighteval's own catalogue below every table here, when lighteval is installed.

        Its multilingual tasks are read only when asked for (`multilingual`, as lighteval does).
        Returns True when tasks were added."""
        loaded = self._catalogue
        if loaded is not None and (loaded.multilingual or not multilingual):
            return False
        if loaded is None and self._catalogue_error is not None:
            return False
        try:
            from lighteval_nanotron.tasks import lighteval_adapter

            catalogue = lighteval_adapter.load_catalogue(multilingual=multilingual)
        except CustomTasksError as error:
            self._catalogue_error = str(error)
            logger.info("lighteval's catalogue is not available: %s", error)
            return False
        self._catalogue = catalogue
        self._tables[LIGHTEVAL_CATALOGUE] = catalogue.configs
        self._rebuild()
        return True

    def _rebuild(self) -> None:
        """Merge the tables in a fixed priority order, whatever order they were loaded in."""
        registry: dict[str, LightevalTaskConfig] = {}
        names = (LIGHTEVAL_CATALOGUE, "default", *SUITE_TABLE_MODULES)
        ordered = [(name, self._tables[name]) for name in names if name in self._tables]
        for origin, table in [*ordered, ("custom", self._custom_table)]:
            new = self.create_task_config_dict(table)
            overridden = [key for key in new if key in registry and registry[key] is not new[key]]
            if overridden and origin != "default":
                logger.warning("%s tasks override existing tasks: %s", origin, ", ".join(overridden))
            registry.update(new)
        self._task_registry = registry

    @staticmethod
    def create_task_config_dict(meta_table: list[LightevalTaskConfig] | None = None) -> dict[str, LightevalTaskConfig]:
        """`suite|name` -> config for every suite of every config (default: the core table)."""
        if meta_table is None:
            module = tables.import_table_module(tables.DEFAULT_TABLE_MODULE)
            meta_table = tables.table_of(module, tables.DEFAULT_TABLE_MODULE) if module is not None else []
        result: dict[str, LightevalTaskConfig] = {}
        for config in meta_table:
            for suite in config.suite:
                key = f"{suite}|{config.name}"
                if key in result and result[key] is not config:
                    logger.warning("Task %s is defined twice in one table; the last definition wins.", key)
                result[key] = config
        return result

    @staticmethod
    def create_custom_tasks_module(custom_tasks: str | Path | ModuleType) -> ModuleType:
        """The custom tasks module from a `.py` path, a module name or a module object."""
        return tables.create_custom_tasks_module(custom_tasks)

    # ----- resolving specs -----

    def _expand(self, key: str) -> list[str]:
        """`suite|name` -> [key], or every `suite|name:*` when `name` is a superset."""
        prefix = key + ":"
        subtasks = sorted(k for k in self._task_registry if k.startswith(prefix))
        if not subtasks:
            return [key] if key in self._task_registry else []
        return ([key] if key in self._task_registry else []) + subtasks

    def _resolve(self, spec: TaskSpec) -> list[str]:
        if spec.suite is not None:
            keys = self._expand(f"{spec.suite}|{spec.task}")
            if not keys and spec.suite not in self._loaded_suites:
                self._load_suites(SUITE_TABLE_MODULES)
                keys = self._expand(f"{spec.suite}|{spec.task}")
        else:
            keys = self._resolve_without_suite(spec)
            if not keys:
                self._load_suites(SUITE_TABLE_MODULES)
                keys = self._resolve_without_suite(spec)
        if not keys and self._load_lighteval_catalogue(multilingual=spec.suite == CATALOGUE_MULTILINGUAL):
            keys = self._expand(f"{spec.suite}|{spec.task}") if spec.suite else self._resolve_without_suite(spec)
        if not keys and spec.suite is not None:
            keys = self._ignoring_the_suite(spec)
        refusal = None if keys else self._catalogue_refusal(spec)
        if not keys and refusal:
            raise TaskSpecError(f"Task spec {spec.text!r} names a lighteval task that cannot run here: {refusal}")
        if not keys:
            raise UnknownTaskError(self._unknown_message(spec))
        return keys

    @property
    def _catalogue_refused(self) -> dict[str, str]:
        """lighteval's catalogue tasks that cannot run here (`suite|name` -> why); empty until it is loaded."""
        return self._catalogue.refused if self._catalogue is not None else {}

    def _ignoring_the_suite(self, spec: TaskSpec) -> list[str]:
        """lighteval 0.12.1+ ignores the suite of `suite|task|k` (0.13 warns): a suite that has no such
        task here names lighteval's task `task` of its catalogue, with a warning saying so."""
        if self._catalogue is None or not self._catalogue.suiteless:
            return []
        from lighteval_nanotron.tasks.lighteval_adapter import CATALOGUE_SUITE

        keys = self._expand(f"{CATALOGUE_SUITE}|{spec.task}")
        if keys:
            logger.warning(
                "Task spec %r: suite %r has no task %r; lighteval %s ignores the suite of suite|task|k, so this is "
                "lighteval's %r: %s. Write %s|%s|%d to silence this warning.",
                spec.text,
                spec.suite,
                spec.task,
                self._catalogue.version,
                spec.task,
                ", ".join(f"{key}|{spec.num_fewshots}" for key in keys),
                CATALOGUE_SUITE,
                spec.task,
                spec.num_fewshots,
            )
        return keys

    def _catalogue_refusal(self, spec: TaskSpec) -> str | None:
        """Why lighteval's task named by `spec` cannot run here (None if it is not a refused one):
        by `suite|task`, or by the name alone when the spec or the installed lighteval has no suite."""
        refused = self._catalogue_refused
        exact = refused.get(f"{spec.suite}|{spec.task}")
        if exact or (spec.suite is not None and not (self._catalogue and self._catalogue.suiteless)):
            return exact
        return next((reason for key, reason in refused.items() if key.split("|", 1)[1] == spec.task), None)

    def _resolve_without_suite(self, spec: TaskSpec) -> list[str]:
        by_suite: dict[str, list[str]] = {}
        for suite in self._known_suites():
            keys = self._expand(f"{suite}|{spec.task}")
            if keys:
                by_suite[suite] = keys
        if len(by_suite) <= 1:
            return next(iter(by_suite.values()), [])
        # A config registered under several suites is found under each; its first suite wins.
        primary = [
            keys for suite, keys in by_suite.items() if all(self._task_registry[k].suite[0] == suite for k in keys)
        ]
        if len(primary) == 1:
            return primary[0]
        options = ", ".join(f"{suite}|{spec.task}|{spec.num_fewshots}" for suite in by_suite)
        raise TaskSpecError(
            f"Task spec {spec.text!r} is ambiguous: several suites define it ({options}). Name the suite."
        )

    def _unknown_message(self, spec: TaskSpec) -> str:
        wanted = f"{spec.suite}|{spec.task}" if spec.suite else spec.task
        pool = list(self._task_registry) if spec.suite else sorted({k.split("|", 1)[1] for k in self._task_registry})
        close = difflib.get_close_matches(wanted, pool, n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        return (
            f"Unknown task {wanted!r} (spec {spec.text!r}).{hint} List tasks with `lighteval-nanotron tasks list "
            "--suites all`; tasks of your own go in a custom tasks file (--custom-tasks / custom_tasks=)."
        )

    def _configs_from_specs(self, specs: list[TaskSpec]) -> list[LightevalTaskConfig]:
        configs: dict[str, tuple[LightevalTaskConfig, TaskSpec]] = {}
        for spec in specs:
            for key in self._resolve(spec):
                config = self._configure(key, spec)
                previous = configs.get(config.full_name)
                if previous is None:
                    configs[config.full_name] = (config, spec)
                elif previous[1].metric_params != spec.metric_params:
                    raise TaskSpecError(
                        f"Specs {previous[1].text!r} and {spec.text!r} both give task {config.full_name} with "
                        "different metric parameters; results would collide. Keep one of them."
                    )
        return [config for config, _ in configs.values()]

    def _configure(self, key: str, spec: TaskSpec) -> LightevalTaskConfig:
        base = self._task_registry[key]
        suite = key.split("|", 1)[0]
        where = f"Task spec {spec.text!r} ({key})"
        params = dict(spec.metric_params)
        metrics = [*base.metrics, *extra_metrics(params.pop(EXTRA_METRICS, None), base.metrics, where)]
        changes: dict[str, Any] = {
            "suite": [suite, *(s for s in base.suite if s != suite)],
            "num_fewshots": spec.num_fewshots,
            "metrics": parametrize_metrics(metrics, params, where),
        }
        if spec.truncate_fewshots is not None:
            changes["truncate_fewshots"] = spec.truncate_fewshots
        return dataclasses.replace(base, **changes)

    # ----- public API -----

    def load_tasks(self) -> dict[str, LightevalTask]:
        """`full_name` -> task, in spec order; every registered task when no spec was given."""
        if not self._configs:
            configs = [self._configure(key, TaskSpec(task=key, text=key)) for key in self._task_registry]
        else:
            configs = self._configs
        return {config.full_name: LightevalTask(config) for config in configs}

    def task_names(self, suites: Iterable[str] | None = None) -> list[str]:
        """Sorted `suite|name` keys, for the given suites (all loaded suites when None)."""
        wanted = None if suites is None else list(dict.fromkeys(suites))
        if wanted:
            self._load_suites(wanted)
        return sorted(k for k in self._task_registry if wanted is None or k.split("|", 1)[0] in wanted)

    def suites_without_tasks(self, suites: Iterable[str]) -> list[str]:
        """The suites among `suites` (`all` aside) that hold no task, lighteval's catalogue included."""
        wanted = [suite for suite in suites if suite != "all"]
        if wanted:
            self._load_lighteval_catalogue(multilingual=CATALOGUE_MULTILINGUAL in wanted)
        return [suite for suite in wanted if not self.task_names([suite])]

    def print_all_tasks(self, suites: str | list[str] | None = None) -> None:
        """Print the tasks of `suites` (comma list; `all` = every suite, lighteval's catalogue included;
        None = the core suites). lighteval's tasks that cannot run here are listed with the reason."""
        if suites is None:
            requested = list(CORE_SUITES)
        else:
            requested = [s.strip() for s in (suites.split(",") if isinstance(suites, str) else suites) if s.strip()]
            self._load_lighteval_catalogue(multilingual=bool({"all", CATALOGUE_MULTILINGUAL} & set(requested)))
            if "all" in requested:
                self._load_suites(SUITE_TABLE_MODULES)
                refused_suites = [key.split("|", 1)[0] for key in self._catalogue_refused]
                requested = list(dict.fromkeys(DEFAULT_SUITES + self._known_suites() + refused_suites))
        names = self.task_names(requested)
        refused = {k: v for k, v in self._catalogue_refused.items() if k.split("|", 1)[0] in requested}
        listed = sorted({*names, *refused})
        by_suite = {suite: list(group) for suite, group in groupby(listed, lambda n: n.split("|", 1)[0])}
        print(f"Displaying tasks for suites: {', '.join(requested)}")
        print("=" * 60)
        for suite in sorted(requested):
            print(f"\n- {suite}:")
            for name in by_suite.get(suite, []):
                print(f"  - {name}" + (f"  (cannot run here: {refused[name]})" if name in refused else ""))
            if suite not in by_suite:
                print("  (no tasks in this suite)")
        cannot_run = f", and {len(refused)} that cannot run here" if refused else ""
        print(f"\nTotal tasks displayed: {len(names)}{cannot_run}")
        if self._catalogue is not None:
            unavailable = self._catalogue.unavailable
            print(
                f"lighteval {self._catalogue.version}'s catalogue: {len(self._catalogue.configs)} tasks"
                + (f"; task modules that fail to import here: {len(unavailable)}" if unavailable else "")
            )
            for module, reason in unavailable.items():
                print(f"  - {module}: {reason}")
