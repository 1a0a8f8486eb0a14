"""Which cache entries a results folder's runs used, recorded in the folder (``cache_keys/``), so
``ragkit cache prune --keep-runs DIR`` never removes what re-running that folder needs.

A process notes every key its caches read or write (``CacheKeyLog``: LLM replies, retrieval
searches; the embedding keys of a run's chunk set are added by the executor on the run's first
commit). The executor drains the log when it commits a shard and writes the keys as one JSON
file in the results folder, just before the shard's commit marker:

- crash safety: a file is written whole or not at all (``Folder.write_bytes``); a crash between
  the keys and the marker leaves keys of an uncommitted shard, which only keeps a little more;
- concurrency: only the folder's writer (it holds the folder's lock) writes records, and each
  record is a new file named by a random id, so records are only ever added, never rewritten;
- no pickle: JSON, one object ``{"format", "run_id", "keys": {cache: [key, ...]}}``.

A cache is named ``llm``, ``retrieval`` or ``embeddings/<embedder key>``. A folder whose runs
were committed before records existed has none for those runs: reading its keep-set is then an
error naming the folder, never a keep-set that silently protects nothing.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable

RECORD_DIR = "cache_keys"
RECORD_FORMAT = 1
LLM = "llm"
RETRIEVAL = "retrieval"
EMBEDDINGS_PREFIX = "embeddings/"


def embeddings_cache(embedder_key: str) -> str:
    """The record name of one embedder's vector cache."""
    return f"{EMBEDDINGS_PREFIX}{embedder_key}"


class CacheKeyLog:
    """The cache keys one process used since the last drain; safe to share across threads."""

    def __init__(self) -> None:
        self._keys: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def note(self, cache: str, key: str) -> None:
        with self._lock:
            self._keys.setdefault(cache, set()).add(key)

    def note_many(self, cache: str, keys: Iterable[str]) -> None:
        with self._lock:
            self._keys.setdefault(cache, set()).update(keys)

    def absorb(self, keys: dict[str, list[str]]) -> None:
        """Add keys another process drained (a Ray worker's, returned with its shard)."""
        for cache, found in keys.items():
            self.note_many(cache, found)

    def drain(self) -> dict[str, list[str]]:
        """The keys noted since the last drain, sorted per cache; the log is then empty."""
        with self._lock:
            keys, self._keys = self._keys, {}
        return {cache: sorted(found) for cache, found in sorted(keys.items())}


def write_record(store, run_id: str, keys: dict[str, list[str]]) -> None:
    """One record of ``run_id``'s keys in the results folder of ``store`` (a ``PartStore``).
    Written even when empty: a record per run is how a reader tells a recorded folder from one
    written before records existed."""
    record = {"format": RECORD_FORMAT, "run_id": run_id, "keys": keys}
    store.files.write_bytes(f"{RECORD_DIR}/{run_id}-{uuid.uuid4().hex[:12]}.json",
                            json.dumps(record, separators=(",", ":")).encode())
