"""The caches under a data directory: the keys a results folder's runs used (``keys``), and sizes
and pruning (``pruning``, ``ragkit cache``).

Public names load on first access (PEP 562), so importing one submodule stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragkit.caches.keys import CacheKeyLog
    from ragkit.caches.pruning import cache_sizes, keep_set, prune_caches

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
    raise AttributeError(f"module 'ragkit.caches' has no attribute {name!r}")
