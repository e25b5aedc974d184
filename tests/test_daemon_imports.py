"""No import circles (docs/architecture.md): the import graph of Freshet's own modules, built from every
`import` statement with `ast` — at module level, inside functions and under TYPE_CHECKING alike
(a lazy import is still a dependency) — is acyclic."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ops", "warehouse", "sim", "policies", "tracks")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The first-party modules `name` imports (`from a.b import c` is a.b.c if that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            named.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            named.add(base)
            named.update(f"{base}.{a.name}" for a in node.names)
    out = set()
    for target in named:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """module → the first-party modules it imports."""
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def test_the_graph_sees_lazy_imports() -> None:
    g = import_graph()
    assert "ops.daemon" in g["ops.run"]  # module level
    assert "ops.demo" in g["ops.daemon"]  # inside a function
    assert len(g) > 40


def test_a_circle_is_found() -> None:
    with pytest.raises(CycleError):
        TopologicalSorter({**import_graph(), "warehouse.errors": {"ops.run"}}).prepare()


def test_no_import_circles_in_ops_and_warehouse() -> None:
    try:
        TopologicalSorter(import_graph()).prepare()
    except CycleError as e:
        raise AssertionError(f"import circle: {' → '.join(e.args[1])}") from None
