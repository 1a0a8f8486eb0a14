"""Retrievers: LlamaIndex BaseRetriever subclasses over a ragkit ChunkIndex.

Build them with the registry ``retrievers``; this package exports the registry, the params and
the base class (for plugins). The base (and LlamaIndex with it) is imported on first access to
its name, so reading the registry or the params models through this package stays light (PEP 562
module ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragkit.retrievers.params import RetrieverInfo, RetrieverParams
from ragkit.retrievers.registry import retrievers

if TYPE_CHECKING:
    from ragkit.retrievers.base import Retriever

__all__ = ["Retriever", "RetrieverInfo", "RetrieverParams", "retrievers"]


def __getattr__(name: str) -> Any:
    if name == "Retriever":
        return importlib.import_module("ragkit.retrievers.base").Retriever
    raise AttributeError(f"module 'ragkit.retrievers' has no attribute {name!r}")
