"""The results package stays layered (issue 30): no import cycle runs through one of its modules,
counting imports inside functions and under TYPE_CHECKING too (a cycle held apart by a local
import is still a cycle to a reader); no module reaches for another's private names; none is
over 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragkit

pytestmark = pytest.mark.unit

RAGKIT = Path(ragkit.__file__).parent
PACKAGE = "ragkit.results"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(RAGKIT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in RAGKIT.rglob("*.py")}


def _imports(path: Path, known: set[str]) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) of every import in ``path``, wherever it stands;
    ``from package import submodule`` counts as importing the submodule."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name in known]
        elif isinstance(node, ast.ImportFrom) and node.module in known and not node.level:
            names = [alias.name for alias in node.names]
            submodules = [f"{node.module}.{name}" for name in names if f"{node.module}.{name}" in known]
            found += [(module, []) for module in submodules]
            taken = [name for name in names if f"{node.module}.{name}" not in known]
            if taken or not submodules:
                found.append((node.module, taken))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: {imported for imported, _ in _imports(path, known)} for name, path in modules.items()}


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from ``start`` back to itself, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        module, path = stack.pop()
        for imported in graph.get(module, ()):
            if imported == start:
                return [*path, start]
            if imported not in seen:
                seen.add(imported)
                stack.append((imported, [*path, imported]))
    return None


def _results_modules() -> list[str]:
    return sorted(name for name in _modules() if name == PACKAGE or name.startswith(PACKAGE + "."))


def test_the_results_package_has_its_modules():
    assert {f"{PACKAGE}.{name}" for name in ("schema", "parts", "result_store", "staleness", "copies")} \
        <= set(_results_modules())


def test_no_import_cycle_runs_through_a_results_module():
    graph = _graph()
    cycles = [cycle for module in _results_modules() if (cycle := _cycle_through(graph, module))]
    assert cycles == [], "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_a_results_module_takes_no_private_name_from_another():
    modules = _modules()
    known = set(modules)
    reached = [(module, imported, name) for module in _results_modules()
               for imported, names in _imports(modules[module], known) for name in names
               if name.startswith("_") and not name.startswith("__")]
    assert reached == []


def test_a_results_module_calls_no_private_method_of_another_object():
    """``store._marker_metrics()`` from another module is reach-through too: only ``self`` and
    ``cls`` are asked for underscore names."""
    modules = _modules()
    reached = []
    for module in _results_modules():
        for node in ast.walk(ast.parse(modules[module].read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                reached.append(f"{module}:{node.lineno} .{node.attr}")
    assert reached == []


def test_no_results_module_is_over_400_lines():
    modules = _modules()
    lengths = {name: len(modules[name].read_text(encoding="utf-8").splitlines()) for name in _results_modules()}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
