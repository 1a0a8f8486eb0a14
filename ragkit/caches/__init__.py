"""The caches under a data directory: the keys a results folder's runs used (``keys``), and sizes
and pruning (``pruning``, ``ragkit cache``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CacheKeyLog": "ragkit.caches.keys",
    "cache_sizes": "ragkit.caches.pruning",
    "keep_set": "ragkit.caches.pruning",
    "prune_caches": "ragkit.caches.pruning",
}

__all__ = ["CacheKeyLog", "cache_sizes", "keep_set", "prune_caches"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
