"""The test tiers, derived from what each test reaches, and a guard that holds the unit tier to them.

- `e2e`: under `tests/e2e/` or `tests/benchmarks/`, trains (Nanotron's trainer, the hook's
  `EvaluatingTrainer`), or launches the command line or training as real jobs
  (`tests/helpers/processes.py`, `multinode.py`, `slurm_cluster.py`).
- `distributed`: starts processes or a process group: gloo ranks (`tests/helpers/distributed.py`),
  `subprocess`, `multiprocessing`.
- `unit`: everything else; `guard_unit_test` fails one that starts a process or a process group.

What a test reaches is read from code, not kept by hand: the test function, its fixtures and the
functions and classes of `tests/` that they name, followed by name (module globals) down to the
modules of `REACHED`. Package code is not followed (its trainer modules are in `REACHED`); a
test-side helper or fixture that starts a process or a process group inside the package
(conversion does) says so with `@reaches("distributed")`, and a test that does it itself carries
`@pytest.mark.distributed`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import multiprocessing.process
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Callable, Iterator, Optional, TypeVar

import pytest

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "distributed", "e2e")  # cheapest first: a test gets the highest tier it reaches
E2E_FOLDERS = ("e2e", "benchmarks")
REACHED = {
    "lighteval_nanotron.hook.trainer": "e2e",  # a Nanotron training with evaluation in the loop
    "nanotron.trainer": "e2e",
    "tests.helpers.processes": "e2e",
    "tests.helpers.multinode": "e2e",
    "tests.helpers.slurm_cluster": "e2e",
    "tests.helpers.distributed": "distributed",
    "subprocess": "distributed",
    "multiprocessing": "distributed",
    "concurrent.futures.process": "distributed",
}
MOVE_IT = (
    "the unit tier starts no process and no process group. Reach it through a helper of tests/helpers/ "
    "(distributed.run_distributed, processes.Followed, ...), or mark the test `@pytest.mark.distributed` "
    "(a test-side helper or fixture: `@reaches('distributed')` from tests/helpers/tiers.py), so that it "
    "runs in its tier (README, Development)"
)

F = TypeVar("F", bound=Callable)


def reaches(tier: str) -> Callable[[F], F]:
    """Declare that a test-side helper or fixture (put it under `@pytest.fixture`) reaches `tier`
    inside the package, where the derivation does not look."""
    assert tier in TIERS, tier

    def mark(function: F) -> F:
        function.reaches_tier = tier
        return function

    return mark


def _highest(tiers) -> str:
    return max(tiers, key=TIERS.index, default="unit")


def _tier_of_module(name: str) -> Optional[str]:
    return next((tier for prefix, tier in REACHED.items() if name == prefix or name.startswith(prefix + ".")), None)


def _test_side(file: Optional[str]) -> bool:
    """A file of tests/, less this module (it names the spawners only to refuse them)."""
    path = Path(file or "/").resolve()
    return path.is_relative_to(TESTS) and path != Path(__file__).resolve()


class _Walker:
    """The highest tier a test-side function reaches, memoized per code object."""

    def __init__(self) -> None:
        self._seen: dict[types.CodeType, str] = {}

    def function(self, function: Callable) -> str:
        function = inspect.unwrap(function)
        declared = getattr(function, "reaches_tier", None)
        if declared:
            return declared
        code = getattr(function, "__code__", None)
        if code is None or not _test_side(code.co_filename):
            return "unit"
        return self._code(code, function.__globals__)

    def _code(self, code: types.CodeType, namespace: dict) -> str:
        if code in self._seen:
            return self._seen[code]
        self._seen[code] = "unit"  # a recursion reaches nothing new
        found = [self._code(const, namespace) for const in code.co_consts if isinstance(const, types.CodeType)]
        scopes = [namespace] + [vars(module) for module in map(_test_module, code.co_names) if module]
        for name in code.co_names:  # globals, attributes, and modules imported inside the function
            found.append(_tier_of_module(name) or "unit")
            found += [self._object(scope[name]) for scope in scopes if name in scope]
        self._seen[code] = _highest(found)
        return self._seen[code]

    def _object(self, value: object) -> str:
        if isinstance(value, types.ModuleType):
            return _tier_of_module(value.__name__) or "unit"
        module = getattr(value, "__module__", None)
        module = module if isinstance(module, str) else ""
        if _tier_of_module(module):
            return _tier_of_module(module)
        if inspect.isclass(value) and _test_side(getattr(sys.modules.get(module), "__file__", None)):
            return _highest(self.function(member) for member in vars(value).values() if inspect.isfunction(member))
        if inspect.isfunction(value):
            return self.function(value)
        return "unit"


def _test_module(name: str) -> Optional[types.ModuleType]:
    """The module of tests/ named `name` (imported inside a function), else None."""
    return importlib.import_module(name) if name.startswith("tests.") and importlib.util.find_spec(name) else None


def derive_tier(item: pytest.Item, walker: _Walker) -> str:
    """The tier one collected test reaches: its folder, its function and its fixtures."""
    path = Path(str(item.path)).resolve().relative_to(TESTS)
    found = ["e2e" if path.parts[0] in E2E_FOLDERS else "unit"]
    found.append(walker.function(item.function) if isinstance(item, pytest.Function) else "unit")
    fixtures = getattr(item, "_fixtureinfo", None)
    for definitions in fixtures.name2fixturedefs.values() if fixtures else ():
        found += [walker.function(definition.func) for definition in definitions]
    return _highest(found)


def mark_tiers(items: list[pytest.Item]) -> None:
    """Give every collected test exactly one tier marker (`-m unit`, `-m distributed`, `-m e2e`): the
    derived one, or a written one where it is higher (a spawn inside the package); a written mark
    that the derivation already gives is refused, so that marks are never kept by hand."""
    walker = _Walker()
    for item in items:
        derived = derive_tier(item, walker)
        written = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if not written:
            item.add_marker(derived)
        elif len(written) > 1 or TIERS.index(written[0]) <= TIERS.index(derived):
            raise pytest.UsageError(
                f"{item.nodeid}: remove its tier mark(s) {written}: it reaches `{derived}` by itself "
                "(tests/helpers/tiers.py), and a test has one tier"
            )


@contextlib.contextmanager
def guard_unit_test(item: pytest.Item) -> Iterator[None]:
    """Around a unit test's setup and call: starting a process or a process group fails it."""
    if item.get_closest_marker("unit") is None:
        yield
        return
    started: list[str] = []

    def refuse(what: str) -> Callable:
        def refused(*args, **kwargs):
            started.append(f"{item.nodeid} started {what}: {MOVE_IT}")
            pytest.fail(started[-1])

        return refused

    import torch.distributed as dist

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", refuse("a subprocess"))
        patch.setattr(multiprocessing.process.BaseProcess, "start", refuse("a multiprocessing process"))
        for name in ("fork", "system", "posix_spawn", "posix_spawnp"):
            patch.setattr(os, name, refuse(f"a process (os.{name})"))
        for module in (dist, dist.distributed_c10d):
            patch.setattr(module, "init_process_group", refuse("a process group (init_process_group)"))
        yield
    if started:  # started on another thread, where the failure did not reach the test
        pytest.fail(started[0], pytrace=False)
