"""The retrieval cache: a search answered once per (index, retriever, parameters, query, scope).

Content-addressed like every other cache: the key is the hash of the index id (its chunk set
and embedder), the retriever's type and parameters as they enter run ids, the query and the
scope's filter, so a sibling configuration (the same retriever under other judges) and a re-run
read the hits instead of searching. One JSON file per search (no pickle). An entry also keeps
the seconds the search took, which a hit reports as replayed, so latency tables still show what
retrieval costs a configuration.

Writes wait until ``flush`` (the executor flushes after each question), so writing a file is
never timed as part of a retrieval step; a crash before it only loses cache entries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.atomic import write_cache_entry
from ragkit.hashing import content_key
from ragkit.index import CHUNK_COLUMNS, Hit

CACHE_FORMAT = 1


class RetrievalCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._pending: dict[str, dict[str, Any]] = {}

    @staticmethod
    def key(index_id: str, retriever: str, params: dict[str, Any], query: str, where: str | None) -> str:
        return content_key("retrieval", index_id, retriever, params, query, where, length=32)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[list[Hit], float] | None:
        entry = self._pending.get(key)
        if entry is None:
            try:
                entry = json.loads(self._path(key).read_text(encoding="utf-8"))
            except FileNotFoundError:
                return None
            except (OSError, ValueError):
                return None  # an unreadable entry is searched again and rewritten
        try:
            if entry.get("format") != CACHE_FORMAT or entry.get("key") != key:
                return None
            hits = [Hit({column: hit["row"][column] for column in CHUNK_COLUMNS}, float(hit["score"]))
                    for hit in entry["hits"]]
            return hits, float(entry["seconds"])
        except (AttributeError, KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, hits: list[Hit], seconds: float) -> None:
        self._pending[key] = {"format": CACHE_FORMAT, "key": key, "seconds": seconds,
                              "hits": [{"row": {c: _plain(hit.row[c]) for c in CHUNK_COLUMNS}, "score": hit.score}
                                       for hit in hits]}

    def flush(self) -> int:
        """Write the entries added since the last flush; returns how many."""
        pending, self._pending = self._pending, {}
        for key, entry in pending.items():
            write_cache_entry(self._path(key), entry)
        return len(pending)


def _plain(value: Any) -> Any:
    """A LanceDB/pandas cell as plain JSON (numpy integers and floats as Python numbers)."""
    if isinstance(value, np.generic):
        return value.item()
    return value
