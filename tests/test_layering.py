"""Module layering: lower packages never import higher ones, and only one module imports lighteval."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lighteval_nanotron"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("metrics", "lighteval_nanotron.models"),
        ("tasks", "lighteval_nanotron.models"),
        # the signal analysis reads results, never the model; the hook and the CLI sit above it
        *(
            ("analysis", f"lighteval_nanotron.{higher}")
            for higher in ("models", "parallel", "cpu", "hook", "cli", "checkpoint_eval")
        ),
    ],
)
def test_lower_package_does_not_import_higher(package, forbidden):
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted((PACKAGE / package).rglob("*.py"))
        if any(name == forbidden or name.startswith(forbidden + ".") for name in _imported_modules(path))
    ]
    assert offenders == []
