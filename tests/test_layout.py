"""The layout of the checkout: every module imports, no import circle, one folder per source, and no
test module importing another (shared helpers live in tests/*_support.py).

The import graph counts every import of an ``exporter`` module, at module level or inside a function:
an import moved into a function to dodge a circle is still a circle.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import exporter
from conftest import ROOT

PACKAGE = Path(exporter.__file__).parent
TESTS = ROOT / "tests"


def modules() -> list[str]:
    """Every module of the ``exporter`` package, packages included."""
    names = ["exporter"]
    names += [m.name for m in pkgutil.walk_packages([str(PACKAGE)], prefix="exporter.")]
    return sorted(names)


def source_of(name: str) -> Path:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imports_of(name: str, known: set[str]) -> set[str]:
    """The ``exporter`` modules that module ``name`` imports anywhere in its source."""
    path = source_of(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` imports mod.
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: imports_of(name, known) for name in known}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_every_module_imports():
    for name in modules():
        if name == "exporter.__main__":
            continue  # runs the command when imported
        importlib.import_module(name)


def test_no_import_circle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_circle_and_a_lazy_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    edges = graph()
    assert "exporter.sources.log.parser" in edges["exporter.sources.log.ingest"]
    assert "exporter.demo" in edges["exporter.cli"]  # imported inside main(): still an edge
    assert "exporter.metrics.scheduler" in edges["exporter.metrics"]  # ``from . import scheduler``


def test_one_folder_per_source_and_the_scheduler_state_apart():
    sources = sorted(p.name for p in (PACKAGE / "sources").iterdir() if (p / "__init__.py").exists())
    assert {"gpu", "log"} <= set(sources)
    edges = graph()
    for name, targets in edges.items():
        if name.startswith("exporter.scheduler"):  # the state knows no source, no web, no command
            assert not {t for t in targets if t.startswith(("exporter.sources", "exporter.web", "exporter.cli"))}, name
        if name.startswith("exporter.sources."):  # a source reaches another source's code never
            own = ".".join(name.split(".")[:3])
            assert not {t for t in targets if t.startswith("exporter.sources.") and not t.startswith(own)}, name
    for name in ("exporter.scheduler.state", "exporter.scheduler.store", "exporter.metrics", "exporter.events"):
        assert not any("prometheus_client" in line for line in source_of(name).read_text().splitlines()
                       if line.startswith(("import", "from"))), f"{name} imports prometheus_client"


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name} imports {n}" for n in names if n.split(".")[0].startswith("test_")]
    assert offenders == []


#: The most lines one module may have (issue 33): what one person reads in one sitting.
MODULE_MAX_LINES = 600


def test_no_module_is_longer_than_one_sitting():
    long = {name: n for name in modules()
            if (n := len(source_of(name).read_text(encoding="utf-8").splitlines())) > MODULE_MAX_LINES}
    assert long == {}, f"modules over {MODULE_MAX_LINES} lines: split them by responsibility"
