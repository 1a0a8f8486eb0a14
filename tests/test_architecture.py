"""The package's shape: no import cycle in ragkit/, errors and the registry at the bottom, short modules.

The import graph is read statically (``ast``), without importing anything:

- Every ``import``/``from ... import`` counts, at module level **and inside functions**. A local
  import still runs the imported module when the function is called, and a cycle "held apart"
  by one is still two modules that each need the other (issue 30 names such cycles): only
  their order of execution was arranged.
- Imports under ``if TYPE_CHECKING:`` count too: they do not run, but they are still a module
  needing another to be read, and a cycle through one is a design knot (issue 42).
- Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``, so it is an edge to each of them
  too, except to a package that contains the importing module (already running when it runs).
- ``from a import b`` is an edge to the module ``a.b`` when there is one, else to ``a``.
- Names given as strings (a registry's built-ins, entry points, ``importlib.import_module``)
  are not edges: they are loaded on first use, by design, and depend on nothing at import time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
# One concept per module: a few hundred lines is normal, 800 a signal to look again (a cap lower than
# that splits concepts into prefixed files instead).
MAX_MODULE_LINES = 800

# Cycles that another part of issue 30 removes, each with who does it. A listed cycle must still
# exist exactly (``test_every_known_cycle_still_exists``), so an entry is deleted once its fix lands.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# Modules at the top of ragkit/: shared vocabulary only (issue 42); everything else is in a package.
MAX_TOP_LEVEL_MODULES = 10


@dataclass(frozen=True)
class Import:
    target: str
    line: int
    local: bool  # inside a function or method


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its own name)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports ``name`` runs (see the module docstring for what counts), as written."""
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno, local) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.append(Import(submodule if submodule in modules else source, node.lineno, local))
        inside = local or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def import_graph(root: Path, package: str) -> nx.DiGraph:
    """Modules of ``package`` as nodes; an edge for each module another one imports (see the
    module docstring for what counts)."""
    modules = module_names(root, package)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for imported in imports_of(name, path, modules):
            parts = imported.target.split(".")
            for depth in range(1, len(parts) + 1):
                target = ".".join(parts[:depth])
                if target in modules and target != name and not name.startswith(target + "."):
                    if not graph.has_edge(name, target):
                        graph.add_edge(name, target, line=imported.line, local=imported.local)
    return graph


def import_cycles(graph: nx.DiGraph) -> list[frozenset[str]]:
    """Each group of modules that import one another, directly or through others."""
    return [frozenset(group) for group in nx.strongly_connected_components(graph) if len(group) > 1]


def describe_cycle(graph: nx.DiGraph, group: frozenset[str]) -> str:
    """One cycle through ``group`` as ``a (line 3) -> b (line 40, in a function) -> a``."""
    steps = nx.find_cycle(graph.subgraph(group))
    described = []
    for source, target in steps:
        edge = graph.edges[source, target]
        described.append(f"{source} (line {edge['line']}{', in a function' if edge['local'] else ''})")
    return " -> ".join([*described, steps[0][0]])


def ragkit_imports(graph: nx.DiGraph, module: str) -> set[str]:
    return set(graph.successors(module))


@pytest.fixture(scope="module")
def ragkit_graph() -> nx.DiGraph:
    return import_graph(REPO, "ragkit")


# --- the walker itself, on packages written for the test ---------------------------------------


def _package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.unit
def test_a_cycle_through_a_function_local_import_is_found(tmp_path):
    root = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import helper\n",
        "pkg/b.py": "def helper():\n    from pkg import a\n    return a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    graph = import_graph(root, "pkg")
    assert import_cycles(graph) == [frozenset({"pkg.a", "pkg.b"})]
    assert describe_cycle(graph, frozenset({"pkg.a", "pkg.b"})) in (
        "pkg.a (line 1) -> pkg.b (line 2, in a function) -> pkg.a",
        "pkg.b (line 2, in a function) -> pkg.a (line 1) -> pkg.b",
    )


@pytest.mark.unit
def test_type_checking_imports_are_edges(tmp_path):
    root = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import typing\nfrom pkg.b import B\n",
        "pkg/b.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
                     "if typing.TYPE_CHECKING:\n    from pkg import a\nelse:\n    from pkg import c\n"),
        "pkg/c.py": "",
    })
    graph = import_graph(root, "pkg")
    assert import_cycles(graph) == [frozenset({"pkg.a", "pkg.b"})]
    assert ragkit_imports(graph, "pkg.b") == {"pkg.a", "pkg.c"}


@pytest.mark.unit
def test_relative_imports_and_parent_packages_are_resolved(tmp_path):
    root = _package(tmp_path, {
        "pkg/__init__.py": "from pkg.sub.leaf import X\n",
        "pkg/sub/__init__.py": "from . import leaf\n",
        "pkg/sub/leaf.py": "from ..other import Y\nX = 1\n",
        "pkg/other.py": "import pkg.sub.leaf\nY = 2\n",
    })
    graph = import_graph(root, "pkg")
    # leaf's own packages are running already when it runs: no edge back to them.
    assert ragkit_imports(graph, "pkg.sub.leaf") == {"pkg.other"}
    assert ragkit_imports(graph, "pkg.sub") == {"pkg.sub.leaf"}
    # importing pkg.sub.leaf from outside pkg.sub runs pkg.sub first.
    assert ragkit_imports(graph, "pkg.other") == {"pkg.sub", "pkg.sub.leaf"}
    assert import_cycles(graph) == [frozenset({"pkg.sub", "pkg.sub.leaf", "pkg.other"})]


# --- ragkit ------------------------------------------------------------------------------------


@pytest.mark.unit
def test_ragkit_has_no_import_cycle(ragkit_graph):
    cycles = [group for group in import_cycles(ragkit_graph) if group not in KNOWN_CYCLES]
    assert not cycles, "import cycles in ragkit/:\n" + "\n".join(
        describe_cycle(ragkit_graph, group) for group in cycles)


@pytest.mark.unit
def test_every_known_cycle_still_exists(ragkit_graph):
    present = set(import_cycles(ragkit_graph))
    gone = [sorted(group) for group in KNOWN_CYCLES if group not in present]
    assert not gone, f"no longer a cycle, delete from KNOWN_CYCLES in tests/test_architecture.py: {gone}"


@pytest.mark.unit
def test_errors_and_quoting_are_at_the_bottom(ragkit_graph):
    # ``errors`` clips its messages with ``quoting``, which uses the standard library only.
    assert ragkit_imports(ragkit_graph, "ragkit.quoting") == set()
    assert ragkit_imports(ragkit_graph, "ragkit.errors") == {"ragkit.quoting"}


@pytest.mark.unit
def test_the_registry_is_generic(ragkit_graph):
    # It knows no kind: each kind's base module imports it and holds that kind's registry, or, for
    # a kind whose classes import LlamaIndex, the kind's own light registry module does.
    assert ragkit_imports(ragkit_graph, "ragkit.registry") <= {"ragkit.errors", "ragkit.hashing", "ragkit.quoting"}
    for base in ("chunkers.registry", "embedders.base", "retrievers.registry", "llms.base", "web.base"):
        assert "ragkit.registry" in ragkit_imports(ragkit_graph, f"ragkit.{base}")


@pytest.mark.unit
def test_the_top_level_holds_shared_vocabulary_only():
    top = sorted(path.stem for path in (REPO / "ragkit").glob("*.py") if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules at the top of ragkit/ (put one in a package): {top}"


@pytest.mark.unit
def test_no_module_is_longer_than_the_limit():
    too_long = {}
    for package in ("ragkit", "dashboard"):
        for path in sorted((REPO / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_MODULE_LINES:
                too_long[str(path.relative_to(REPO))] = lines
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


# --- docs/architecture.md's package map ---------------------------------------------------------


def map_rows(text: str) -> list[list[str]]:
    """The units (``cli/``, ``errors.py``) of each row of the package map, top row first."""
    section = text.split("## Package map", 1)[1]
    block = section.split("```", 2)[1]
    return [row for row in ([unit for unit in line.split() if unit.endswith(("/", ".py"))]
                            for line in block.splitlines()) if row]


def unit_of(module: str) -> str:
    """A module's place on the map: its package under ragkit/ (``cli/``) or its file (``errors.py``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return f"{parts[1]}/" if (REPO / "ragkit" / parts[1]).is_dir() else f"{parts[1]}.py"


@pytest.mark.unit
def test_the_package_map_names_every_package_once_and_is_true_to_the_import_graph(ragkit_graph):
    rows = map_rows((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    row_of = {unit: index for index, row in enumerate(rows) for unit in row}
    assert sum(len(row) for row in rows) == len(row_of), "a unit is on two rows of the package map"
    units = {unit_of(module) for module in ragkit_graph.nodes} - {"__init__.py"}
    assert units == set(row_of), (f"not on the map: {sorted(units - set(row_of))}; "
                                  f"on the map, not in ragkit/: {sorted(set(row_of) - units)}")
    upward = sorted({f"{unit_of(a)} -> {unit_of(b)} ({a} line {ragkit_graph.edges[a, b]['line']})"
                     for a, b in ragkit_graph.edges
                     if unit_of(b) in row_of and unit_of(a) in row_of and row_of[unit_of(b)] < row_of[unit_of(a)]})
    assert not upward, "imports going up a row of docs/architecture.md's package map:\n" + "\n".join(upward)
