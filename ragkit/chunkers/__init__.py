"""Chunkers: one strategy per module, each a LlamaIndex NodeParser returning exact spans.

Import concrete chunkers from their modules (or build them with the registry ``chunkers``);
this package re-exports the base so that plugins can subclass it. The base (and LlamaIndex with
it) is imported on first access to one of its names, so reading the registry or the params
models through this package stays light (PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragkit.chunkers.params import ChunkerParams, WindowParams
from ragkit.chunkers.registry import chunkers

if TYPE_CHECKING:
    from ragkit.chunkers.base import Chunker, Span, clean_spans, close_gaps, locate_chunks

_FROM_BASE = ("Chunker", "Span", "clean_spans", "close_gaps", "locate_chunks")

__all__ = ["Chunker", "ChunkerParams", "Span", "WindowParams", "chunkers", "clean_spans", "close_gaps", "locate_chunks"]


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        return getattr(importlib.import_module("ragkit.chunkers.base"), name)
    raise AttributeError(f"module 'ragkit.chunkers' has no attribute {name!r}")
