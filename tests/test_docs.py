"""docs/failure_modes.md stays a reference: short, three cells a row, each row held by a test that exists.

A row's test cell names tests as `tests/path.py::name` (`name` a module-level test, `Class::method`, or
a parametrized id `name[...]`); `::name` alone is a test of the cell's last named file.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAILURE_MODES = ROOT / "docs" / "failure_modes.md"
MAX_BYTES = 25_000
HEADER = ["guarantee", "what the user sees", "test"]
_TEST_REF = re.compile(r"`(tests/[\w/]+\.py)?::([\w:]+)(?:\[[^\]`]*\])?`")
_HISTORY = re.compile(r"\bBefore,|\bthe old code\b")
"""How a row tells what happened before the guarantee held (the story belongs in git)."""


def _table_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every table line, header and separator lines included."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())
            rows.append((number, [cell.strip() for cell in cells[1:-1]]))
    return rows


@cache
def _tests_in(path: str) -> frozenset[str]:
    """`name` and `Class::method` of every test function (`test*`) a test file defines."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")
            )
    return frozenset(names)


def _missing_tests(cell: str) -> tuple[int, list[str]]:
    """How many tests the cell names with their file, and those of its names that do not exist."""
    named_files, missing, current = 0, [], None
    for match in _TEST_REF.finditer(cell):
        path, name = match.groups()
        if path:
            named_files += 1
            current = path
        if current is None:
            missing.append(f"::{name} (no file named before it)")
        elif not (ROOT / current).is_file() or name not in _tests_in(current):
            missing.append(f"{current}::{name}")
    return named_files, missing


def test_failure_modes_is_short_and_every_row_is_held_by_an_existing_test():
    text = FAILURE_MODES.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    assert size < MAX_BYTES, f"docs/failure_modes.md is {size} bytes: keep it under {MAX_BYTES} (one short row each)"
    rows = _table_rows(text)
    assert rows, "docs/failure_modes.md holds no table"
    problems = []
    for number, cells in rows:
        if len(cells) != 3:
            problems.append(f"line {number}: {len(cells)} cells, not 3 (a `|` inside a cell is written `\\|`)")
        elif cells == HEADER or set("".join(cells)) <= set("-: "):
            continue
        elif cells[0] == HEADER[0]:
            problems.append(f"line {number}: a table's header is | {' | '.join(HEADER)} |")
        else:
            named_files, missing = _missing_tests(cells[2])
            if not named_files:
                problems.append(f"line {number}: names no test as `tests/path.py::name`")
            problems += [f"line {number}: no test {name}" for name in missing]
            if _HISTORY.search(" ".join(cells[:2])):
                problems.append(f"line {number}: tells history; state what holds now")
    assert not problems, "\n".join(problems)


def test_a_row_naming_a_test_that_does_not_exist_is_found():
    this_file, this_test = "tests/test_docs.py", "test_a_row_naming_a_test_that_does_not_exist_is_found"
    assert _missing_tests(f"`{this_file}::{this_test}`") == (1, [])
    assert _missing_tests(f"`{this_file}::{this_test}[a-b]`") == (1, [])  # a parametrized id
    assert _missing_tests(f"`{this_file}::{this_test}`, `::no_such_test`") == (1, [f"{this_file}::no_such_test"])
    assert _missing_tests(f"`{this_file}::_table_rows`")[1] == [f"{this_file}::_table_rows"]  # a helper, no test
    assert _missing_tests("`tests/no_such_file.py::test_x`")[1] == ["tests/no_such_file.py::test_x"]
    assert _missing_tests("`::test_x` alone") == (0, ["::test_x (no file named before it)"])
    assert [len(cells) for _, cells in _table_rows("| a \\| b | c |\n| a | b | c |")] == [2, 3]
