"""A package's public names loaded on first access (PEP 562), by import path: importing one
submodule of the package neither loads nor depends on the others, and ``import ragkit.x`` stays
cheap where a name's module pulls in LlamaIndex, LanceDB or torch.

A package writes ``__getattr__ = lazy_exports(__name__, {"Name": "ragkit.x.module", ...})``. Eight
lines of our own rather than ``lazy_loader`` (scientific-python): one more dependency for a
dictionary lookup, and its ``attach`` builds ``__all__`` and ``__dir__`` the packages here spell
out for mypy and readers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's module ``__getattr__``: ``name`` from the module ``where`` names for it."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
