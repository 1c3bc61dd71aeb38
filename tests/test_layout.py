"""Package layout: no import cycle between modules and no use of another module's private names.

The checks read the source (AST) of every module under ``src/crowdlearn``; nothing is
imported.  Module-level and function-level imports both count, relative and absolute.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "crowdlearn"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_names(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is package ``__init__``)."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mods[".".join(parts)] = (path, is_pkg)
    return mods


def _absolute(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


class _Graph:
    """Edges module -> imported package module, and every private-name use across modules."""

    def __init__(self, root: Path) -> None:
        self.mods = _module_names(root)
        self.root = root
        self.top = root.name
        self.edges: dict[str, set[str]] = {m: set() for m in self.mods}
        self.private: list[str] = []
        for mod, (path, is_pkg) in self.mods.items():
            self._scan(mod, is_pkg, ast.parse(path.read_text(encoding="utf-8"), str(path)))

    def _own(self, name: str) -> bool:
        return name == self.top or name.startswith(self.top + ".")

    def _containing_module(self, name: str) -> str:
        """The longest prefix of a dotted name that is a module of the package."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            cand = ".".join(parts[:i])
            if cand in self.mods:
                return cand
        return name

    def _private_module(self, importer: str, target: str) -> bool:
        """``target`` has a private component below the part it shares with ``importer``."""
        a, b = importer.split("."), target.split(".")
        common = 0
        while common < min(len(a), len(b)) and a[common] == b[common]:
            common += 1
        return any(_is_private(p) for p in b[common:])

    def _scan(self, mod: str, is_pkg: bool, tree: ast.AST) -> None:
        aliases: dict[str, str] = {}  # local name -> package module it is bound to
        where = str(self.mods[mod][0].relative_to(self.root.parent))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _absolute(mod, is_pkg, node.level, node.module)
                if not self._own(target):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    dest = sub if sub in self.mods else self._containing_module(target)
                    if dest != mod:
                        self.edges[mod].add(dest)
                    if sub in self.mods:
                        aliases[alias.asname or alias.name] = sub
                    if dest != mod and (
                        (sub not in self.mods and _is_private(alias.name))
                        or self._private_module(mod, dest)
                    ):
                        line = f"{where}:{node.lineno} from {target} import {alias.name}"
                        self.private.append(line)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if not self._own(alias.name):
                        continue
                    dest = self._containing_module(alias.name)
                    if dest != mod:
                        self.edges[mod].add(dest)
                    if self._private_module(mod, dest):
                        self.private.append(f"{where}:{node.lineno} import {alias.name}")
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):  # module._name attribute access through an imported module
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _is_private(node.attr)
                and aliases[node.value.id] != mod
            ):
                self.private.append(f"{where}:{node.lineno} {node.value.id}.{node.attr}")

    def cycles(self) -> list[list[str]]:
        """Strongly connected components with more than one module (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on_stack.add(v)
            for w in sorted(self.edges.get(v, ())):
                if w not in self.mods:
                    continue
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        for v in sorted(self.mods):
            if v not in index:
                visit(v)
        return out


@pytest.fixture(scope="module")
def graph() -> _Graph:
    return _Graph(PACKAGE_ROOT)


def test_graph_sees_the_package(graph):
    """The scan reaches every layer and resolves relative imports (guards a vacuous pass)."""
    expected = {"crowdlearn.core.data", "crowdlearn.core.stats", "crowdlearn.aggregation.moments"}
    assert expected <= set(graph.mods)
    assert "crowdlearn.core.stats" in graph.edges["crowdlearn.aggregation.dawid_skene"]
    assert "crowdlearn.core.data" in graph.edges["crowdlearn.core.io"]
    assert "crowdlearn.core.tables" in graph.edges["crowdlearn.core.data"]  # function-level import


def test_no_private_name_from_another_module(graph):
    assert graph.private == [], "private names used across modules:\n" + "\n".join(graph.private)


def test_no_import_cycle(graph):
    cycles = graph.cycles()
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_checker_catches_planted_violations(tmp_path):
    """A private import, a private attribute access and a cycle in a toy package are found."""
    pkg = tmp_path / "crowdlearn"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text(
        "from .b import _hidden\n\ndef f():\n    from . import b\n    return b._other\n"
    )
    (pkg / "sub" / "b.py").write_text(
        "def g():\n    from .a import f\n    return f\n_hidden = 1\n_other = 2\n"
    )
    (pkg / "sub" / "_priv.py").write_text("")
    (pkg / "c.py").write_text("import crowdlearn.sub._priv\n")
    toy = _Graph(pkg)
    assert any("import _hidden" in p for p in toy.private)
    assert any("b._other" in p for p in toy.private)
    assert any("sub._priv" in p for p in toy.private)
    assert toy.cycles() == [["crowdlearn.sub.a", "crowdlearn.sub.b"]]
