"""The package's layering, as README ("What is inside") and docs/architecture.md state it.

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
   tasks, metrics, requests, data, tracking and analysis never see a process group or a model
   (no parallel, cpu, nanotron_compat or models; no `torch.distributed`, no `nanotron`); parallel
   never sees tasks, metrics or loggers; analysis never imports models.
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
    ("requests", "data", "nanotron_compat"),
    ("metrics", "parallel"),
    ("tasks", "heldout"),
    ("options",),
    ("models",),
    ("cpu", "pipeline"),
    ("tracking",),
    ("analysis",),
    ("lighteval_options",),
    ("setup",),
    ("checkpoint_eval", "convert", "evaluate_once"),
    ("hook",),
    ("cli",),
    ("__main__", ROOT),
)
LAYER_OF = {room: index for index, rooms in enumerate(LAYERS) for room in rooms}

_NO_MESH_NO_MODEL = {"parallel", "cpu", "nanotron_compat", "models", "torch.distributed", "nanotron"}
NEVER: dict[str, set[str]] = {
    **{room: _NO_MESH_NO_MODEL for room in ("tasks", "metrics", "requests", "data", "tracking", "analysis")},
    "parallel": {"tasks", "metrics", "tracking", "pipeline", "analysis"},
}
"""room -> rooms (or outside modules, by dotted prefix) it must not import."""

LIGHTEVAL_IMPORTER = f"{ROOT}.tasks.lighteval_adapter"
_MODULE_STRING = re.compile(rf"{ROOT}(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _is_module_name(text: str) -> bool:
    """A dotted string naming a module of the package (a lazy export), not e.g. a config key."""
    if not _MODULE_STRING.fullmatch(text):
        return False
    location = PACKAGE.parent.joinpath(*text.split("."))
    return location.with_suffix(".py").is_file() or (location / "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import of the file, anywhere in it."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _is_module_name(node.value):
            found.append((node.value, []))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def _own(imported: str) -> bool:
    return imported == ROOT or imported.startswith(f"{ROOT}.")


def _named(imported: str, prefix: str) -> bool:
    return imported == prefix or imported.startswith(f"{prefix}.")


def test_every_module_is_in_a_declared_room_and_imports_only_lower_rooms():
    undeclared, upward = set(), []
    for path in MODULES:
        module = _module_name(path)
        room = _room(module)
        if room not in LAYER_OF:
            undeclared.add(room)
            continue
        for imported, _ in _imports(path):
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
        for imported, names in _imports(path):
            if _named(imported, "lighteval") and not _named(module, LIGHTEVAL_IMPORTER):
                broken.append(f"{module} imports {imported}: only {LIGHTEVAL_IMPORTER} imports lighteval")
            if _own(imported) and _room(imported) != room:
                private = [name for name in names if name.startswith("_") and not name.startswith("__")]
                broken += [f"{module} imports {name}, private to {imported}" for name in private]
            for forbidden in NEVER.get(room, ()):
                if _named(imported, f"{ROOT}.{forbidden}" if forbidden in LAYER_OF else forbidden):
                    broken.append(f"{module} imports {imported}: {room} never imports {forbidden}")
    assert not broken, "\n".join(broken)


def test_no_test_package_shadows_a_folder_of_the_repository():
    """pytest imports a test folder that has an `__init__.py` as a top-level package of its own
    name: `tests/benchmarks/__init__.py` made `benchmarks` the tests' folder for the whole run, and
    `lighteval-nanotron bench` (which imports `benchmarks.bench_eval`) failed in every later test."""
    tests = Path(__file__).resolve().parent
    packages = {init.parent.name for init in tests.rglob("__init__.py")}
    repository = {path.name for path in tests.parent.iterdir() if path.is_dir()}
    assert not packages & repository, sorted(packages & repository)
