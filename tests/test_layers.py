"""The layering of ../shared/design.md, checked on the source: machinery imports nothing of
nanokube's; components reach the API server only through the client; no controller imports
the scheduler; and no two modules import each other, directly or around a circle.

Imports are read with `ast` (module level and inside functions alike), so a lazy import
inside a function cannot hide a dependency; only imports under `if TYPE_CHECKING:` (annotations,
never executed) are left out."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "nanokube"

#: packages that act only through the API: they may not import the server side
COMPONENTS = ("client", "controllers", "scheduler", "node", "proxy", "pki", "metrics", "cel")
SERVER_SIDE = ("apiserver", "registry", "store")
#: vocabulary beyond machinery that the server and components share; they import only each other and machinery
SHARED = ("machinery", "dra", "cel", "quota", "volume", "clock", "schema")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: the fields that hold statements (an import is a statement, so nothing below an expression is read)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _runtime_nodes(tree: ast.AST):
    """Every statement of the tree except those under `if TYPE_CHECKING:`, which only annotate."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in _BODIES:
            children = getattr(node, field, None)
            if not isinstance(children, list):
                continue
            if field == "body" and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            todo.extend(children)


@functools.cache
def _imports() -> dict[str, set[str]]:
    """Every nanokube module and the nanokube modules it imports (resolved to modules,
    `from pkg import mod` counted as importing pkg.mod when that is a module)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("nanokube"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.startswith("nanokube"):
                    target = node.module
                else:
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    found.add(sub if sub in modules else target)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_machinery_imports_nothing_of_nanokube():
    bad = {m: sorted(d) for m, d in _imports().items() if _package(m) == "machinery"
           for d in [{x for x in d if _package(x) != "machinery"}] if d}
    assert not bad


def test_shared_helpers_import_only_shared_helpers():
    bad = {m: sorted(d) for m, d in _imports().items() if _package(m) in SHARED
           for d in [{x for x in d if _package(x) not in SHARED}] if d}
    assert not bad


def test_components_do_not_import_the_server_side():
    bad = {m: sorted(d) for m, d in _imports().items() if _package(m) in COMPONENTS
           for d in [{x for x in d if _package(x) in SERVER_SIDE}] if d}
    assert not bad


def test_the_console_imports_nothing_of_nanokube():
    """nanokube/ui is a static page and its file server: the page reaches the cluster only as an
    API client of the server, under the user's token."""
    assert not {m: d for m, d in _imports().items() if _package(m) == "ui" and d}


def test_controllers_do_not_import_the_scheduler():
    bad = {m: sorted(d) for m, d in _imports().items() if _package(m) == "controllers"
           for d in [{x for x in d if _package(x) == "scheduler"}] if d}
    assert not bad


def test_node_agents_do_not_import_the_scheduler():
    bad = {m: sorted(d) for m, d in _imports().items() if _package(m) == "node"
           for d in [{x for x in d if _package(x) == "scheduler"}] if d}
    assert not bad


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles():
    assert _cycles(_imports()) == []


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
