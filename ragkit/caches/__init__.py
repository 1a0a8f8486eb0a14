"""The caches under a data directory: the keys a results folder's runs used (``keys``), and sizes
and pruning (``pruning``, ``ragkit cache``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "CacheKeyLog": "ragkit.caches.keys",
    "cache_sizes": "ragkit.caches.pruning",
    "keep_set": "ragkit.caches.pruning",
    "prune_caches": "ragkit.caches.pruning",
}

__all__ = ["CacheKeyLog", "cache_sizes", "keep_set", "prune_caches"]

__getattr__ = lazy_exports(__name__, _WHERE)
