"""The layer's import graph (#29.2): no import cycle between modules, imports under TYPE_CHECKING included,
and no function-level import of a nodescale module (a deferred import only hides a cycle).

The graph is grimp's (the library import-linter runs on), so it reads imports as ``lint-imports`` does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

import nodescale

PACKAGE = "nodescale"
ROOT = Path(nodescale.__file__).parent

ALLOWED_CYCLES: list[set[str]] = []
# The command line imports a use-case only when its command runs, so `nodescale plan -f` and `--help` do not
# pay for boto3, kubernetes and the functions' use-cases (about 1 s more on this machine, measured 2026-11-27).
# Nothing else in the layer defers an import.
ALLOWED_DEFERRED_UNDER = "nodescale/commands/"


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's strongly connected components of the module graph, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def test_the_strongly_connected_components_are_found() -> None:
    """The cycle finder itself: a three-module cycle is one component, a module outside it its own."""
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c", "d"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["d"]]


def test_no_import_cycle_between_modules() -> None:
    """#29.2: no strongly connected component of more than one module in the layer's import graph."""
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=False)
    cycles = [c for c in strongly_connected(graph) if len(c) > 1 and c not in ALLOWED_CYCLES]
    described = []
    for cycle in cycles:
        first = min(cycle)
        back = next(m for m in sorted(cycle) if m != first)
        chain = [*graph.find_shortest_chain(first, back), *graph.find_shortest_chain(back, first)[1:]]
        described.append(f"{sorted(cycle)} (e.g. {' -> '.join(chain)})")
    assert not cycles, "import cycles: " + "; ".join(described)


def deferred_imports(path: Path) -> list[str]:
    """The nodescale imports inside a function of ``path`` (blocks under ``if TYPE_CHECKING:`` allowed)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            return
        if in_function and isinstance(node, ast.ImportFrom) and (
                node.level > 0 or (node.module or "").split(".")[0] == PACKAGE):
            found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import ...")
        if in_function and isinstance(node, ast.Import):
            found.extend(f"line {node.lineno}: import {a.name}" for a in node.names
                         if a.name.split(".")[0] == PACKAGE)
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def test_the_deferred_import_scan_sees_function_bodies_only(tmp_path: Path) -> None:
    """The scan itself: an import in a function is found, one at the top or under TYPE_CHECKING is not."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nfrom . import a\nif TYPE_CHECKING:\n    from . import b\n"
        "def f():\n    import json\n    from .c import x\n    if TYPE_CHECKING:\n        from . import d\n"
        "    return x\n",
        encoding="utf-8",
    )
    assert deferred_imports(source) == ["line 7: from .c import ..."]


def test_no_function_level_import_of_a_nodescale_module() -> None:
    """#29.2: no deferred import of a nodescale module anywhere in the layer."""
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT.parent).as_posix()
        found = deferred_imports(path)
        if found and not relative.startswith(ALLOWED_DEFERRED_UNDER):
            offenders[relative] = found
    assert not offenders, f"function-level imports of nodescale modules: {offenders}"


# The yardstick for small modules (#29): a module a newcomer can read, a function that fits a screen.
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_no_module_over_600_lines_and_no_function_over_80() -> None:
    """#29: the layer keeps its modules and functions small as it grows; the first too long is named."""
    too_long = []
    for path in sorted(ROOT.rglob("*.py")):
        source = path.read_text()
        lines = source.count("\n")
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, too_long
