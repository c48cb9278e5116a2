"""Move the package's rooms so that a parameter crosses each room once, downward (issue 36, item 4).

    python scripts/restructure_rooms.py            # from the repository root, on a clean work tree
    python scripts/restructure_rooms.py --dry-run  # print what it would do, change nothing

What it does, in this order, printing each step:
1. `tests/test_layering.py` and `docs/architecture.md` become the versions kept in
   `scripts/restructure_rooms/` (the new rooms, their order and the checks for cycles and imports
   inside functions), merged three-way with any change made to them since (`git merge-file`; the
   table of rooms row by row: a row the restructure left as it was keeps its text of today);
2. `git mv` of every module or package of `MOVES` (old module path -> new), creating the new
   rooms' `__init__.py` (`NEW_PACKAGES`);
3. every reference to a moved module is rewritten in every file git tracks (code, tests, scripts,
   examples, docs, configs, Makefile, pyproject): dotted module paths (`from x.y import`,
   `import x.y`, `from x import y`, lazy-export strings, `python -m x.y`, `monkeypatch` strings),
   file paths (`lighteval_nanotron/x/y.py`, and relative ones such as `hook/config.py`), module
   paths in backticks relative to the package (`hook.config_check.check_training_config`), and
   `TEXT_EDITS`; then the definitions of `MOVED_DEFINITIONS` move between modules;
4. imports of the package's own modules inside functions move to module level where that loads
   nothing more and creates no cycle (`hoist_imports`): the imported module is already loaded by
   the module's own module-level imports (or it is light, `ALSO_HOISTED`); with ruff installed,
   import blocks are then sorted and the files its format held are formatted again;
5. the layering test's `DEFERRED_BUDGET` becomes the number of such imports left.

Anything left to the lead is printed as `by hand:` or `fix by hand:` (and a merge conflict makes
the exit status 1). It rewrites by module path, not by line, so it runs on files changed since it was written. Run a
second time it finds nothing to move and nothing to rewrite, and says so. Delete this script and
`scripts/restructure_rooms/` once it has run.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = "lighteval_nanotron"

MOVES: list[tuple[str, str]] = [
    # lighteval and Nanotron-`lighteval:` compatibility: one room, above the options it maps onto
    (f"{ROOT}.lighteval_options", f"{ROOT}.lighteval_compat.fields"),
    (f"{ROOT}.hook.nanotron_lighteval_section", f"{ROOT}.lighteval_compat.nanotron_section"),
    (f"{ROOT}.checkpoint_eval.lighteval_config", f"{ROOT}.lighteval_compat.eval_config"),
    # the settings of each way in, declared beside the shared options
    (f"{ROOT}.hook.config", f"{ROOT}.options.hook"),
    (f"{ROOT}.checkpoint_eval.config", f"{ROOT}.options.checkpoint_eval"),
    (f"{ROOT}.checkpoint_eval.launch.settings", f"{ROOT}.options.launch"),
    # job launching (local, Slurm): its own room, for the hook and any other way in
    (f"{ROOT}.checkpoint_eval.launch", f"{ROOT}.launch"),
    # the seed data layer inside the engine that uses it
    (f"{ROOT}.data", f"{ROOT}.models.engine.data"),
    # checkpoint files apart from the engine
    (f"{ROOT}.models.checkpoint", f"{ROOT}.checkpoints"),
    # the training launcher apart from the trainer callback
    (f"{ROOT}.hook.run_train", f"{ROOT}.training.run_train"),
    (f"{ROOT}.hook.preflight", f"{ROOT}.training.preflight"),
    (f"{ROOT}.hook.config_check", f"{ROOT}.training.config_check"),
    (f"{ROOT}.hook.training_data", f"{ROOT}.training.data"),
]
"""Old module path -> new, a more specific path before the package that holds it."""

NEW_PACKAGES: dict[str, str] = {
    f"{ROOT}.lighteval_compat": (
        "lighteval's eval YAML and Nanotron's `lighteval:` training-config section, mapped onto our options:\n"
        "one table for both (`fields`), the hook's section from Nanotron's (`nanotron_section`), and `eval\n"
        "--lighteval-config-path` (`eval_config`). Read as plain data: no lighteval or Nanotron import.\n"
    ),
    f"{ROOT}.training": (
        "`lighteval-nanotron train`: a Nanotron training with the evaluation hook (`run_train`), the checks\n"
        "made before any process starts (`config_check`, `preflight`) and the training data loaders (`data`).\n"
    ),
}
"""New packages that no move brings an `__init__.py` to -> their docstring."""

ALSO_HOISTED = (
    f"{ROOT}.checkpoint_eval.discovery",
    f"{ROOT}.models.engine.model",
    f"{ROOT}.parallel.agreement",
    f"{ROOT}.parallel.distributed",
    f"{ROOT}.setup.engine",
    f"{ROOT}.training.data.dataloader",
)
"""Modules (new paths) whose imports inside functions name light modules that nothing waits for:
moved to module level even where they load more (never where they would make a cycle)."""

KEPT = Path(__file__).resolve().parent / "restructure_rooms"
REPLACED = {
    "tests/test_layering.py": ("test_layering.py.base", "test_layering.py"),
    "docs/architecture.md": ("architecture.md.base", "architecture.md"),
}
"""File -> (the version the new one was written from, the new one), both in `KEPT`."""

MOVED_DEFINITIONS: list[tuple[str, str, tuple[str, ...]]] = [
    # The key check reads any YAML mapping against a dataclass; the reader of the training config
    # (hook) uses it, and the launcher's check of that config (training) imports the reader: the
    # check moves down to the reader, so that the two modules no longer import each other.
    (
        f"{ROOT}.training.config_check",
        f"{ROOT}.hook.training_config",
        ("check_known_keys", "_unknown_keys", "_dataclass_of"),
    ),
]
"""(module, module, top-level definitions moved from the first to the second), new paths; done
after the references are rewritten, on the definitions as they are then."""

TEXT_EDITS: list[tuple[str, str, str]] = [
    (
        "docs/hook.md",
        "the launched job: `settings.py` (the `asynchronous:` keys), ",
        "the launched job (its `asynchronous:` keys are `options/launch.py`): ",
    ),
]
"""(file, text, its replacement) where a file names a moved module by its bare file name; applied
before the rewriting, and printed for the lead to do by hand where the text is no longer there."""

SKIPPED = ("scripts/restructure_rooms.py", "scripts/restructure_rooms/")


def git(*args: str, capture: bool = True) -> str:
    done = subprocess.run(["git", *args], capture_output=capture, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"error: git {' '.join(args)} failed: {(done.stderr or '').strip()}")
    return done.stdout if capture else ""


def module_path(module: str) -> tuple[Path, bool] | None:
    """(file or folder, is a package) of `module` in the work tree, None when absent."""
    location = Path(*module.split("."))
    if (location / "__init__.py").is_file():
        return location, True
    if location.with_suffix(".py").is_file():
        return location.with_suffix(".py"), False
    return None


# 1. the layering test and the architecture doc ---------------------------------------------------


def unbudgeted(text: str) -> str:
    """`text` with the layering test's budget, which step 5 sets, left out."""
    return re.sub(r"^DEFERRED_BUDGET = \d+$", "DEFERRED_BUDGET = 0", text, flags=re.M)


TABLE_ROW = re.compile(r"^\| (\d+) \| (.+?) \| (.*) \|$")
"""A row of docs/architecture.md's table of rooms: layer, rooms, what they hold."""


def split_table(text: str) -> tuple[str, dict[str, str], str]:
    """(the text before the rooms table's rows, {rooms: what they hold}, the text after)."""
    lines = text.splitlines(keepends=True)
    rows = [index for index, line in enumerate(lines) if TABLE_ROW.match(line.rstrip("\n"))]
    if not rows:
        return text, {}, ""
    table = {}
    for index in rows:
        match = TABLE_ROW.match(lines[index].rstrip("\n"))
        table[match.group(2)] = match.group(3)
    return "".join(lines[: rows[0]]), table, "".join(lines[rows[-1] + 1 :])


def merged_table(current: str, base: str, new: str) -> tuple[tuple[str, str, str, list[str]], str]:
    """The three texts with the rooms table's rows replaced by one marker line each, the new table
    (a row the restructure left as it was takes its current text: changes made since are kept),
    and the rows changed both since and by the restructure (to carry over by hand)."""
    current_head, current_rows, current_tail = split_table(current)
    base_head, base_rows, base_tail = split_table(base)
    new_head, new_rows, new_tail = split_table(new)
    marker = "@@ rooms table @@\n"
    rows, by_hand = [], []
    for layer, (rooms, holds) in enumerate(new_rows.items()):
        if base_rows.get(rooms) == holds:
            holds = current_rows.get(rooms, holds)
        elif rooms in base_rows and current_rows.get(rooms, base_rows[rooms]) != base_rows[rooms]:
            by_hand.append(f"{rooms}: {current_rows[rooms]}")
        rows.append(f"| {layer} | {rooms} | {holds} |\n")
    if not new_rows:
        return (current, base, new, []), ""
    merged = (current_head + marker + current_tail, base_head + marker + base_tail, new_head + marker + new_tail)
    return (*merged, by_hand), "".join(rows)


def merge_three_way(current: str, base: str, new: str) -> tuple[str, bool]:
    """`git merge-file` of the three texts: (the merge, whether it has conflicts)."""
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for name, text in (("current", current), ("base", base), ("new", new)):
            paths.append(Path(folder, name))
            paths[-1].write_text(text)
        merged = subprocess.run(
            ["git", "merge-file", "-p", "-L", "current", "-L", "base", "-L", "restructure", *map(str, paths)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    if merged.returncode < 0 or merged.returncode > 127:
        sys.exit(f"error: git merge-file failed: {merged.stderr.strip()}")
    return merged.stdout, merged.returncode > 0


def replace_kept_files(dry_run: bool) -> list[str]:
    conflicts = []
    for target, (base_name, new_name) in REPLACED.items():
        current, base, new = (path.read_text() for path in (Path(target), KEPT / base_name, KEPT / new_name))
        if unbudgeted(current) == unbudgeted(new):
            print(f"  {target}: already the new version")
            continue
        if current == base:
            print(f"  {target}: replaced by {KEPT / new_name}")
            if not dry_run:
                Path(target).write_text(new)
            continue
        (current, base, new, by_hand), table = (
            merged_table(current, base, new) if target.endswith(".md") else ((current, base, new, []), "")
        )
        merged, conflicted = merge_three_way(current, base, new)
        merged = merged.replace("@@ rooms table @@\n", table)
        print(f"  {target}: changed since; merged three-way" + (" WITH CONFLICTS" if conflicted else ""))
        for row in by_hand:
            print(f"   by hand: the row of {row!r} changed since; carry that change into its new row")
        if conflicted:
            conflicts.append(target)
        if not dry_run:
            Path(target).write_text(merged)
    return conflicts


# 2. moves -----------------------------------------------------------------------------------------


def move_rooms(dry_run: bool) -> list[tuple[str, str]]:
    """`git mv` each move still to do; the moves done (now or before) for the rewriting."""
    done = []
    for old, new in MOVES:
        source, target = module_path(old), module_path(new)
        if source and target:
            sys.exit(f"error: both {source[0]} and {target[0]} exist: move {old} by hand, then run this again.")
        if target:
            print(f"  {old} -> {new}: already moved")
            done.append((old, new))
            continue
        if source is None:
            print(f"  {old}: not found (removed since?), nothing moved; references are still rewritten")
            done.append((old, new))
            continue
        path, package = source
        destination = Path(*new.split(".")) if package else Path(*new.split(".")).with_suffix(".py")
        print(f"  git mv {path} {destination}")
        if not dry_run:
            ensure_package(destination.parent)
            git("mv", str(path), str(destination))
            remove_if_untracked(path)
        done.append((old, new))
    return done


def ensure_package(folder: Path) -> None:
    """`folder` and the packages above it exist, each with its `__init__.py`."""
    if folder == Path(ROOT) or (folder / "__init__.py").is_file():
        return
    ensure_package(folder.parent)
    module = ".".join(folder.parts)
    if module not in NEW_PACKAGES:
        sys.exit(f"error: {folder} is a new package with no docstring in NEW_PACKAGES: add one.")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(f'"""{NEW_PACKAGES[module]}"""\n')
    git("add", str(folder / "__init__.py"))
    print(f"  created {folder / '__init__.py'}")


def remove_if_untracked(path: Path) -> None:
    """A moved package's old folder when only untracked files (`__pycache__`) are left in it."""
    if path.is_dir() and not git("ls-files", str(path)).strip():
        shutil.rmtree(path)


# 3. references ------------------------------------------------------------------------------------


def rewrite_rules(moves: list[tuple[str, str]]) -> list[tuple[re.Pattern[str], dict[str, str]]]:
    """(pattern, old text -> new text) pairs; each pattern is one alternation, longest first."""
    dotted, slashed, relative_dotted, relative_slashed = {}, {}, {}, {}
    for old, new in moves:
        dotted[old] = new
        old_parts, new_parts = old.split("."), new.split(".")
        slashed["/".join(old_parts)] = "/".join(new_parts)
        for start in range(1, len(old_parts) - 1):  # relative forms: hook/config.py, launch/settings.py,
            # `hook.config_check.check_training_config`
            relative_dotted[".".join(old_parts[start:])] = ".".join(new_parts[1:])
            relative_slashed["/".join(old_parts[start:])] = "/".join(new_parts[1:])
    relative_dotted["lighteval_options"] = "lighteval_compat.fields"  # the top-level module named bare in prose
    relative_slashed["lighteval_options"] = "lighteval_compat/fields"

    def alternation(table: dict[str, str]) -> str:
        return "|".join(re.escape(key) for key in sorted(table, key=len, reverse=True))

    return [
        (re.compile(rf"(?<![\w.])({alternation(dotted)})(?![\w])"), dotted),
        (re.compile(rf"(?<![\w./-])({alternation(slashed)})(?=\.py\b|/)"), slashed),
        (re.compile(rf"(?<![\w./-])({alternation(relative_slashed)})(?=\.py\b|/)"), relative_slashed),
        (re.compile(rf"(?<=`)({alternation(relative_dotted)})(?=[`.(])"), relative_dotted),
    ]


def moved_submodule_imports(text: str, moves: dict[str, str]) -> str:
    """`from P import c` where `P.c` moved and `P` did not, as `from Q import d as c` (`Q.d` the new
    path; `as c` only where the name changed); other names of the statement stay where they are."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    nodes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and not node.level
        and node.module not in moves
        and any(f"{node.module}.{alias.name}" in moves for alias in node.names)
    ]
    for node in sorted(nodes, key=lambda node: node.lineno, reverse=True):
        indent = " " * node.col_offset
        kept = [alias for alias in node.names if f"{node.module}.{alias.name}" not in moves]
        statements = [f"from {node.module} import {', '.join(ast.unparse(alias) for alias in kept)}"] if kept else []
        for alias in node.names:
            if alias in kept:
                continue
            package, _, child = moves[f"{node.module}.{alias.name}"].rpartition(".")
            bound = alias.asname or alias.name
            statements.append(f"from {package} import {child}" + (f" as {bound}" if bound != child else ""))
        lines[node.lineno - 1 : node.end_lineno] = [f"{indent}{statement}\n" for statement in statements]
    return "".join(lines)


def rewrite_references(moves: list[tuple[str, str]], dry_run: bool) -> list[str]:
    """The files rewritten."""
    rules = rewrite_rules(moves)
    changed = []
    for name in git("ls-files").splitlines():
        path = Path(name)
        if name.startswith(SKIPPED) or not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new_text = moved_submodule_imports(text, dict(moves)) if name.endswith(".py") else text
        for file, old, new in TEXT_EDITS:
            if file == name:
                if old in new_text:
                    new_text = new_text.replace(old, new)
                else:
                    print(f"   by hand, if still needed: in {file}, {old!r} -> {new!r}")
        for pattern, table in rules:
            new_text = pattern.sub(lambda match, table=table: table[match.group(1)], new_text)
        if new_text != text:
            count = sum(1 for a, b in zip(text.splitlines(), new_text.splitlines()) if a != b)
            print(f"  {name}: {count} line(s)")
            changed.append(name)
            if not dry_run:
                path.write_text(new_text)
    return changed


def move_definitions(dry_run: bool) -> list[str]:
    """Each of `MOVED_DEFINITIONS`: the definitions cut from one module and appended to the other,
    with the imports they use; importers of them (the target aside) import them from their new
    module. The files changed."""
    changed: list[str] = []
    for source_module, target_module, names in MOVED_DEFINITIONS:
        source, target = module_path(source_module), module_path(target_module)
        if source is None or target is None:
            print(f"  {source_module} or {target_module} not found: move {', '.join(names)} by hand")
            continue
        source_path = source[0] / "__init__.py" if source[1] else source[0]
        target_path = target[0] / "__init__.py" if target[1] else target[0]
        source_text, target_text = source_path.read_text(), target_path.read_text()
        source_tree, target_tree = ast.parse(source_text), ast.parse(target_text)
        found = [node for node in source_tree.body if getattr(node, "name", None) in names]
        if not found:
            print(f"  {', '.join(names)}: not in {source_module} (moved already?)")
            continue
        lines = source_text.splitlines(keepends=True)
        cut = set()
        for node in found:
            first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)]) - 1
            cut.update(range(first, node.end_lineno))
            after = node.end_lineno
            while after < len(lines) and not lines[after].strip():
                cut.add(after)
                after += 1
        spans = [(min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1, node.end_lineno) for node in found]
        moved_code = "\n\n".join("".join(lines[start:end]) for start, end in spans)
        kept_source = "".join(line for index, line in enumerate(lines) if index not in cut).rstrip("\n") + "\n"
        used = {node.id for node in ast.walk(ast.parse(moved_code)) if isinstance(node, ast.Name)}
        bound_in_target = module_level_names(target_tree)
        imports = []
        for statement in source_tree.body:
            if isinstance(statement, ast.Import):
                aliases = [a for a in statement.names if (a.asname or a.name.split(".")[0]) in used - bound_in_target]
                imports += [f"import {ast.unparse(a)}" for a in aliases]
            elif isinstance(statement, ast.ImportFrom) and not statement.level:
                aliases = [a for a in statement.names if (a.asname or a.name) in used - bound_in_target]
                if aliases:
                    imports.append(f"from {statement.module} import {', '.join(ast.unparse(a) for a in aliases)}")
        target_text = drop_imported_names(target_text, source_module, set(names))
        anchor = import_block_end(ast.parse(target_text)) or 0
        target_lines = target_text.splitlines(keepends=True)
        target_lines[anchor:anchor] = [f"{line}\n" for line in imports]
        target_text = "".join(target_lines).rstrip("\n") + "\n\n\n" + moved_code.rstrip("\n") + "\n"
        public = sorted(name for name in names if not name.startswith("_"))
        still_used = {n.id for n in ast.walk(ast.parse(kept_source)) if isinstance(n, ast.Name)} & set(public)
        if still_used:
            source_lines = kept_source.splitlines(keepends=True)
            anchor = import_block_end(ast.parse(kept_source)) or 0
            source_lines.insert(anchor, f"from {target_module} import {', '.join(sorted(still_used))}\n")
            kept_source = "".join(source_lines)
        print(f"  {', '.join(names)}: {source_module} -> {target_module}")
        if not dry_run:
            source_path.write_text(kept_source)
            target_path.write_text(target_text)
            changed += [str(source_path), str(target_path)]
            command = ruff()
            if command is None:
                print(f"   ruff not found: remove the imports {source_path} no longer uses")
            else:  # the imports only the moved definitions used
                subprocess.run(
                    [*command, "check", "--select", "F401", "--fix", "--quiet", str(source_path)], check=False
                )
            for name in git("ls-files", "*.py").splitlines():
                if name not in (str(source_path), str(target_path)) and Path(name).is_file():
                    text = Path(name).read_text()
                    new_text = redirect_imported_names(text, source_module, target_module, set(public))
                    if new_text != text:
                        Path(name).write_text(new_text)
                        changed.append(name)
    return changed


def drop_imported_names(text: str, module: str, names: set[str]) -> str:
    """`text` without `names` in its `from module import ...` statements (a statement left empty goes)."""
    return redirect_imported_names(text, module, None, names)


def redirect_imported_names(text: str, module: str, target: str | None, names: set[str]) -> str:
    """`from module import a, b` with `names` among them: those imported from `target` instead (or
    dropped with no target)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    nodes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == module and {a.name for a in node.names} & names
    ]
    for node in sorted(nodes, key=lambda node: node.lineno, reverse=True):
        indent = " " * node.col_offset
        kept = [a for a in node.names if a.name not in names]
        moved = [a for a in node.names if a.name in names]
        statements = [f"from {module} import {', '.join(ast.unparse(a) for a in kept)}"] if kept else []
        if target is not None:
            statements.append(f"from {target} import {', '.join(ast.unparse(a) for a in moved)}")
        lines[node.lineno - 1 : node.end_lineno] = [f"{indent}{statement}\n" for statement in statements]
    return "".join(lines)


# 4. imports inside functions ----------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def own_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(Path(ROOT).rglob("*.py"))}


def imported_modules(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package's modules an absolute import statement names (a name taken from a package that is
    one of its modules counts as that module; parent packages are `ancestors`)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    return {name for name in names if name in modules}


def ancestors(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def module_level_imports(tree: ast.Module, modules: dict[str, Path]) -> set[str]:
    """What the module's top-level statements import (not under `if TYPE_CHECKING:`, not in
    functions or classes)."""
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, (ast.Import, ast.ImportFrom)) and not getattr(statement, "level", 0):
                found.update(imported_modules(statement, modules))
            elif isinstance(statement, ast.If) and not is_type_checking(statement):
                visit(statement.body + statement.orelse)
            elif isinstance(statement, ast.Try):
                visit(statement.body)

    visit(tree.body)
    return found


def closure(starts: set[str], edges: dict[str, set[str]], in_progress: frozenset[str] = frozenset()) -> set[str]:
    """Every module that importing `starts` loads (parent packages first), none of `in_progress`:
    the packages whose import is under way when the importing module runs (its own parents) load
    nothing more then."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        module = todo.pop()
        if module in seen or module in in_progress:
            continue
        seen.add(module)
        todo.extend(edges.get(module, ()))
        todo.extend(ancestors(module))
    return seen


def module_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for statement in tree.body:
        for node in ast.walk(statement) if not isinstance(statement, (ast.FunctionDef, ast.ClassDef)) else [statement]:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def hoistable(tree: ast.Module) -> list[tuple[list[ast.stmt], ast.ImportFrom]]:
    """(the block holding it, `from lighteval_nanotron... import` statement) of each such import in
    a function, in its body or in a block of it (`if`, `with`, `for`; not `try`, where an import
    may be expected to fail)."""
    found = []

    def visit(block: list[ast.stmt]) -> None:
        for statement in block:
            if isinstance(statement, ast.ImportFrom):
                if not statement.level and (statement.module or "").split(".")[0] == ROOT:
                    found.append((block, statement))
            elif isinstance(statement, (ast.If, ast.For, ast.While, ast.With)):
                visit(statement.body)
                visit(getattr(statement, "orelse", []))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node.body)
    return found


def hoist_imports(dry_run: bool) -> list[str]:
    """Move to module level each import inside a function whose modules the file's module-level
    imports already load (so it loads nothing more, earlier or later, and adds no cycle), unless a
    name it binds is bound otherwise at module level. The files changed."""
    modules = own_modules()
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}
    edges = {name: module_level_imports(tree, modules) for name, tree in trees.items()}
    hoisted = []
    for name, path in modules.items():
        tree = trees[name]
        in_progress = frozenset(ancestors(name) | {name})
        loaded = closure(edges[name], edges, in_progress)
        taken = module_level_names(tree)
        existing = {ast.unparse(statement) for statement in tree.body if isinstance(statement, ast.ImportFrom)}
        remove: list[ast.ImportFrom] = []
        add: list[str] = []
        for block, statement in hoistable(tree):
            needed = imported_modules(statement, modules)
            if not (needed <= loaded or name in ALSO_HOISTED) or name in closure(needed, edges):
                continue  # it would load more, or import this module back
            edges[name] |= needed
            text = ast.unparse(statement)
            bound = {alias.asname or alias.name for alias in statement.names}
            if text not in existing and bound & taken:
                continue
            if len([s for s in block if not is_docstring(s)]) == 1:
                continue  # the function or block would be left empty
            remove.append(statement)
            if text not in existing and text not in add:
                add.append(text)
                taken |= bound
        if not remove or import_block_end(tree) is None:
            continue
        print(f"  {path}: {len(remove)} import(s) to module level")
        hoisted.append(str(path))
        if not dry_run:
            path.write_text(edited(path.read_text(), tree, remove, add))
    return hoisted


def import_block_end(tree: ast.Module) -> int | None:
    """The last line of the module-level imports of the package (else of any module), None when none."""
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    own = [s for s in imports if ROOT in ast.unparse(s)]
    return max((s.end_lineno for s in own or imports), default=None)


def ruff() -> list[str] | None:
    if shutil.which("ruff"):
        return ["ruff"]
    return [sys.executable, "-m", "ruff"] if importlib.util.find_spec("ruff") is not None else None


def unformatted() -> set[str]:
    """The Python files `ruff format` would change (none known without ruff)."""
    command = ruff()
    if command is None:
        return set()
    done = subprocess.run([*command, "format", "--check", "."], capture_output=True, text=True, check=False)
    named = re.compile(r"^(?:Would reformat: (\S+)|\s*--> (\S+?):\d+:\d+)$")  # older ruff, newer ruff
    return {next(filter(None, m.groups())) for m in map(named.match, done.stdout.splitlines()) if m}


def tidy(files: list[str], unformatted_before: set[str]) -> None:
    """Import blocks in ruff's order and, in the files ruff's format held before, its format (longer
    module paths rewrap); the lines still too long are printed."""
    command = ruff()
    if not files:
        return
    if command is None:
        print(f"   ruff not found: run `ruff check --select I --fix` and `ruff format` on: {' '.join(files)}")
        return
    subprocess.run([*command, "check", "--select", "I", "--fix", "--quiet", *files], check=False)
    formatted = [name for name in files if name not in unformatted_before]
    subprocess.run([*command, "format", "--quiet", *formatted], check=False)
    print(f"   ruff: import blocks sorted in {len(files)} file(s), {len(formatted)} of them formatted")
    long_lines = subprocess.run(
        [*command, "check", "--select", "E501", "--output-format", "concise", *files],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    for line in long_lines.stdout.splitlines():
        if ": E501" in line:
            print(f"   fix by hand: {line}")


def is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def edited(text: str, tree: ast.Module, remove: list[ast.ImportFrom], add: list[str]) -> str:
    """`text` without the `remove` statements (and the blank line after one that ends an import
    block), with the `add` imports after the last module-level import of the package."""
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()
    for statement in remove:
        span = range(statement.lineno - 1, statement.end_lineno)
        drop.update(span)
        after = statement.end_lineno
        before = statement.lineno - 2
        if (
            after < len(lines)
            and not lines[after].strip()
            and (
                before < 0
                or not lines[before].strip()
                or lines[before].rstrip().endswith((":", '"""'))
                or before in drop
            )
        ):
            drop.add(after)  # the blank line that separated the function's imports from its code
    anchor = import_block_end(tree)
    result = []
    for index, line in enumerate(lines):
        if index not in drop:
            result.append(line)
        if index == anchor - 1:
            result.extend(f"{statement}\n" for statement in add)
    return "".join(result)


def set_deferred_budget(dry_run: bool) -> None:
    """`DEFERRED_BUDGET` in tests/test_layering.py: the imports inside functions left after the moves."""
    spec = importlib.util.spec_from_file_location("restructured_layering", "tests/test_layering.py")
    layering = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layering)
    count = len(layering.deferred_imports())
    path = Path("tests/test_layering.py")
    text, replaced = re.subn(r"^DEFERRED_BUDGET = \d+$", f"DEFERRED_BUDGET = {count}", path.read_text(), flags=re.M)
    if replaced != 1:
        print("   DEFERRED_BUDGET not found in tests/test_layering.py: set it by hand")
        return
    print(f"   {count} imports of the package's own modules inside functions: DEFERRED_BUDGET = {count}")
    if not dry_run:
        path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print what would be done, change nothing")
    parser.add_argument("--no-hoist", action="store_true", help="leave the imports inside functions where they are")
    args = parser.parse_args()
    if not Path(ROOT, "__init__.py").is_file():
        sys.exit(f"error: run from the repository root (the folder holding {ROOT}/).")
    if git("status", "--porcelain", "--untracked-files=no").strip() and not args.dry_run:
        sys.exit("error: the work tree has uncommitted changes: commit or stash them first.")
    print("1. the layering test and the architecture doc")
    conflicts = replace_kept_files(args.dry_run)
    unformatted_before = unformatted()
    print("2. moves")
    moves = move_rooms(args.dry_run)
    print("3. references")
    changed = rewrite_references(moves, args.dry_run)
    print(f"   {len(changed)} file(s) rewritten" if changed else "   nothing to rewrite")
    print("3b. definitions")
    changed += move_definitions(args.dry_run)
    hoisted: list[str] = []
    if not args.no_hoist and not args.dry_run:
        print("4. imports inside functions")
        hoisted = hoist_imports(args.dry_run)
        print(f"   imports moved to module level in {len(hoisted)} file(s)" if hoisted else "   nothing to hoist")
    if not args.dry_run:
        renamed = rewrite_rules(moves)[1]
        before = {renamed[0].sub(lambda match: renamed[1][match.group(1)], name) for name in unformatted_before}
        tidy(sorted({name for name in [*changed, *hoisted] if name.endswith(".py")}), before)
        print("5. the budget of imports inside functions")
        set_deferred_budget(args.dry_run)
    if conflicts:
        sys.exit(f"error: resolve the merge conflicts in {', '.join(conflicts)} (markers 'current'/'restructure').")
    print("done: check `git status`, run tests/test_layering.py, then commit.")


if __name__ == "__main__":
    main()
