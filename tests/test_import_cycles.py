"""No import cycle among the project's modules (core/, app_pages/, app.py).

The graph is read with `ast`, not by importing: every `import` and `from ... import` anywhere in a file counts,
inside functions and `if TYPE_CHECKING:` blocks too, so a cycle cannot hide behind an import moved into a function
(that only defers it to the first call). `from package import name` is an edge to `package.name` where that is a
module, else to the package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("core", "app_pages")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    found = {module_name(p, root): p for top in TOP for p in sorted((root / top).rglob("*.py"))}
    if (root / "app.py").exists():
        found["app"] = root / "app.py"
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for a in node.names:
                sub = f"{source}.{a.name}"
                out.add(sub if sub in known else source)
    return {m for m in out if m in known and m != name}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = project_modules(root)
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_the_project():
    graph = import_graph()
    assert len(graph) > 60
    assert "core.scenario" in graph["core.estimate"]
    assert "app_pages.shared.fields" in graph["app_pages.shared.state"]


def test_a_function_level_import_closes_a_cycle(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "a.py").write_text("from core.b import f\n")
    (tmp_path / "core" / "b.py").write_text("def f():\n    from core import a\n    return a\n")
    assert cycles(import_graph(tmp_path)) == [["core.a", "core.b"]]


def test_no_import_cycle():
    assert cycles(import_graph()) == []
