"""The package's layering, as docs/architecture.md states it.

A room is a top-level package or module of `lighteval_nanotron` (`models`, `errors`, ...; the
package's own `__init__` is the room `lighteval_nanotron`). `LAYERS` orders the rooms, lowest
first. What is checked, for every module of the package:

1. every import it makes, wherever it is (module level, inside functions, under
   `if TYPE_CHECKING:`; relative imports resolved; a module of the package named by a dotted string
   constant, as `importlib.import_module("lighteval_nanotron.x")` or a lazy-export table, counts too), names
   its own room or a room of a lower layer; rooms of the same layer do not import each other;
2. its room is declared in `LAYERS` (a new room is placed there; a declared room may not exist yet:
   the order also places the rooms of work in flight);
3. only `tasks/lighteval_adapter/` imports `lighteval`;
4. it imports no private name (`_name`) of another room;
5. `NEVER`: pairs the order alone would allow, or states only implicitly, that must not be:
   tasks, metrics, requests, the engine's data layer, tracking and analysis never see a process
   group or a model (no parallel, cpu, nanotron_compat, models or checkpoints; no
   `torch.distributed`, no `nanotron`); parallel never sees tasks, metrics or loggers;
6. no import cycle, between rooms or inside one: the graph of every import that runs (module level
   and inside functions, lazy exports; not `if TYPE_CHECKING:`) has none;
7. imports of the package's own modules inside functions stay where `DEFERRED` says why, and their
   number stays within `DEFERRED_BUDGET`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lighteval_nanotron"
ROOT = "lighteval_nanotron"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "steps", "yaml_keys"),
    ("version", "console_errors"),
    ("requests", "nanotron_compat"),
    ("metrics", "parallel"),
    ("tasks", "heldout"),
    ("options",),
    ("lighteval_compat",),
    ("models",),
    ("checkpoints", "cpu", "pipeline"),
    ("tracking",),
    ("analysis",),
    ("launch",),
    ("setup",),
    ("checkpoint_eval", "convert", "evaluate_once", "hook"),
    ("training",),
    ("cli",),
    ("__main__", ROOT),
)
LAYER_OF = {room: index for index, rooms in enumerate(LAYERS) for room in rooms}

_NO_MESH_NO_MODEL = {"parallel", "cpu", "nanotron_compat", "models", "checkpoints", "torch.distributed", "nanotron"}
NEVER: dict[str, set[str]] = {
    **{
        part: _NO_MESH_NO_MODEL
        for part in ("tasks", "metrics", "requests", "models.engine.data", "tracking", "analysis")
    },
    "parallel": {"tasks", "metrics", "tracking", "pipeline", "analysis"},
}
"""part of the package (a room, or a module or package by its dotted path) -> rooms (or outside
modules, by dotted prefix) it must not import."""

DEFERRED: dict[str, str] = {
    "cli": "a command imports what it runs when it runs: `lighteval-nanotron --help` stays light",
    "training": "`train` sets the threads, the CPU support and the process group before Nanotron and the trainer "
    "load; a data loader loads when it is the one asked for",
    "hook": "`import lighteval_nanotron.hook` (the section's types, for the trainer's config) stays light: the "
    "evaluation's setup loads when training starts",
    "checkpoint_eval": "`eval` builds the mesh (threads, CPU support, process group) before Nanotron, the engine "
    "and the tasks load",
    "evaluate_once": "`lighteval_nanotron.evaluate` is a lazy export; the engine, tracking and the signal load only "
    "for the model and loggers it is given",
    "setup": "the tokenizer, the pipeline and tracking load when a way in sets up, not when its options are read",
    "tracking.paths": "the results-file reader loads the pipeline's result types; paths stay light for the launcher",
    "tracking.config": "W&B (an optional extra) loads only when its logger is on",
    "tasks.config": "lighteval (an optional extra) is adapted only when a config holds one of its objects",
    "tasks.lighteval_task": "lighteval (an optional extra) is adapted only when a task holds one of its docs",
    "tasks.registry": "the lighteval adapter and its catalogue load when a lighteval task is named; the package "
    "(which imports this module) after it is loaded",
    "tasks.tables": "the package (which imports this module) after it is loaded; the lighteval adapter on first use",
    "cpu": "each patch module imports the Nanotron it patches: loaded by `enable_cpu_support()`",
    "models.families": "a family's conversion and CPU needs import Nanotron's modules: loaded when asked for",
}
"""part of the package -> why its modules import others of the package inside functions."""
DEFERRED_BUDGET = 93
"""The most imports of the package's own modules inside functions: the count when the rooms were
last moved. Lower it when one moves to module level."""

LIGHTEVAL_IMPORTER = f"{ROOT}.tasks.lighteval_adapter"
_MODULE_STRING = re.compile(rf"{ROOT}(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _module_file(module: str) -> Path | None:
    location = PACKAGE.parent.joinpath(*module.split("."))
    for candidate in (location.with_suffix(".py"), location / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_module_name(text: str) -> bool:
    """A dotted string naming a module of the package (a lazy export), not e.g. a config key."""
    return bool(_MODULE_STRING.fullmatch(text)) and _module_file(text) is not None


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path) -> list[tuple[str, list[str], bool, bool]]:
    """(imported module, names taken from it, inside a function, under `if TYPE_CHECKING:`) for
    every import of the file, anywhere in it."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, list[str], bool, bool]] = []

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            checking = type_checking or _is_type_checking(child)
            if isinstance(child, ast.Import):
                found.extend((alias.name, [], inner, checking) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.append((base, [alias.name for alias in child.names], inner, checking))
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) and _is_module_name(child.value):
                found.append((child.value, [], inner, checking))
            visit(child, inner, checking)

    visit(ast.parse(path.read_text()), False, False)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def _own(imported: str) -> bool:
    return imported == ROOT or imported.startswith(f"{ROOT}.")


def _named(imported: str, prefix: str) -> bool:
    return imported == prefix or imported.startswith(f"{prefix}.")


def _part_of(module: str, table: dict[str, object]) -> str | None:
    """The longest key of `table` (a room or a dotted path below the package) that `module` is in."""
    keys = [key for key in table if _named(module, ROOT if key == ROOT else f"{ROOT}.{key}")]
    return max(keys, key=len, default=None)


def test_every_module_is_in_a_declared_room_and_imports_only_lower_rooms():
    undeclared, upward = set(), []
    for path in MODULES:
        module = _module_name(path)
        room = _room(module)
        if room not in LAYER_OF:
            undeclared.add(room)
            continue
        for imported, _, _, _ in _imports(path):
            target = _room(imported)
            if _own(imported) and target != room and LAYER_OF.get(target, len(LAYERS)) >= LAYER_OF[room]:
                upward.append(f"{module} (layer {LAYER_OF[room]}) imports {imported} ({target})")
    assert not undeclared, f"place these rooms in LAYERS and in docs/architecture.md: {sorted(undeclared)}"
    assert not upward, "imports of a room that is not lower:\n" + "\n".join(upward)


def test_every_module_keeps_the_specific_rules():
    broken = []
    for path in MODULES:
        module = _module_name(path)
        room = _room(module)
        for imported, names, _, _ in _imports(path):
            if _named(imported, "lighteval") and not _named(module, LIGHTEVAL_IMPORTER):
                broken.append(f"{module} imports {imported}: only {LIGHTEVAL_IMPORTER} imports lighteval")
            if _own(imported) and _room(imported) != room:
                private = [name for name in names if name.startswith("_") and not name.startswith("__")]
                broken += [f"{module} imports {name}, private to {imported}" for name in private]
            for part, forbidden in NEVER.items():
                if not _named(module, f"{ROOT}.{part}"):
                    continue
                for name in forbidden:
                    if _named(imported, f"{ROOT}.{name}" if name in LAYER_OF else name):
                        broken.append(f"{module} imports {imported}: {part} never imports {name}")
    assert not broken, "\n".join(broken)


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of the package its imports run (a name taken from a package that is
    one of its modules counts as that module)."""
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        module = _module_name(path)
        targets = graph.setdefault(module, set())
        for imported, names, _, type_checking in _imports(path):
            if not _own(imported) or type_checking:
                continue
            submodules = [f"{imported}.{name}" for name in names if _module_file(f"{imported}.{name}")]
            targets.update(submodules or [imported])
            if len(submodules) < len(names):
                targets.add(imported)
        targets.discard(module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in graph:
                continue
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycle_anywhere():
    cycles = _cycles(_import_graph())
    assert not cycles, "modules that import each other (through imports inside functions too):\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_cycles_are_found_through_imports_inside_functions():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def deferred_imports() -> list[tuple[str, str]]:
    """(module, the package's module it imports inside a function) of every such import."""
    return [
        (_module_name(path), imported)
        for path in MODULES
        for imported, _, in_function, type_checking in _imports(path)
        if in_function and _own(imported) and not type_checking
    ]


def test_imports_inside_functions_stay_where_a_reason_is_stated():
    deferred = deferred_imports()
    unexplained = [
        f"{module} imports {imported}" for module, imported in deferred if _part_of(module, DEFERRED) is None
    ]
    assert not unexplained, "import these at module level, or state in DEFERRED why they wait:\n" + "\n".join(
        unexplained
    )
    assert len(deferred) <= DEFERRED_BUDGET, (
        f"{len(deferred)} imports of the package's own modules inside functions, over the budget of "
        f"{DEFERRED_BUDGET}: import at module level where no reason in DEFERRED applies"
    )


@pytest.mark.parametrize("part", sorted((set(NEVER) | set(DEFERRED)) - {ROOT}))
def test_every_part_named_by_the_rules_exists(part):
    assert _module_file(f"{ROOT}.{part}") is not None, f"{part} is named in the rules but is no module of the package"


def test_no_test_package_shadows_a_folder_of_the_repository():
    """pytest imports a test folder that has an `__init__.py` as a top-level package of its own
    name: `tests/benchmarks/__init__.py` made `benchmarks` the tests' folder for the whole run, and
    `lighteval-nanotron bench` (which imports `benchmarks.bench_eval`) failed in every later test."""
    tests = Path(__file__).resolve().parent
    packages = {init.parent.name for init in tests.rglob("__init__.py")}
    repository = {path.name for path in tests.parent.iterdir() if path.is_dir()}
    assert not packages & repository, sorted(packages & repository)
