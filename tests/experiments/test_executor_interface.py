"""The Ray executor runs the in-process executor's steps through its public interface only.

Before issue 30 it called the local executor's private methods and imported its underscore
functions (``_answer_shard``, ``_shards``): a change inside the executor could break the Ray
path unseen. This test reads the Ray modules' source (the executor, its worker and its
dispatcher): every underscore name they touch must be their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragkit.experiments

pytestmark = pytest.mark.unit

# Read, not imported: the check holds whether or not Ray and the module import.
RAY_MODULES = ("ray_executor.py", "ray_worker.py", "ray_schedule.py")
SOURCE = ast.Module(body=[statement for name in RAY_MODULES for statement in ast.parse(
    (Path(ragkit.experiments.__file__).parent / name).read_text(encoding="utf-8")).body], type_ignores=[])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_names(tree: ast.Module) -> set[str]:
    """Functions, methods, module names and ``self._x`` attributes the Ray modules define."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
    return names


def test_ray_executor_imports_no_private_name_of_ragkit():
    imported = [(node.module, alias.name) for node in ast.walk(SOURCE) if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("ragkit") for alias in node.names]
    assert imported  # the check reads real imports
    assert [name for name in imported if _private(name[1])] == []


def test_every_private_attribute_ray_executor_uses_is_its_own():
    own = _own_names(SOURCE)
    used = {node.attr for node in ast.walk(SOURCE) if isinstance(node, ast.Attribute) and _private(node.attr)}
    assert "_run_tasks" in used  # the check sees the module's own privates
    assert sorted(used - own) == []
