"""The semantic cache's entries on disk: what ``semantic_cache_store: persistent`` keeps across runs.

The dynamic-documents design keeps its semantic cache per document and across sessions: a query
asked again later, or a paraphrase of it, is answered from the hits stored for that document. A
space holds the entries of one (index, retriever, document scope): the index id stands for the
corpus version, the chunker and the embedder (its query vectors are compared; its chunks are the
hits), the retriever's type and parameters for how the hits were ranked, the scope's filter for
the document(s) searched. An entry is the query, its unit vector and its hits.

Entries live in one SQLite table (``ROOT/semantic.sqlite``), for the reasons the exact retrieval
cache gives (``ragkit.retrievers.cache``): several processes write at once, each flush is one
transaction, readers go on while one writes. A vector is stored as float32 bytes with its length
(no pickle); hits as JSON rows. Writes wait for ``flush`` (the pipeline flushes after each
question), so no retrieval step times them; a crash before it loses only those entries.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.artefacts.index import CHUNK_COLUMNS, Hit
from ragkit.hashing import content_key
from ragkit.retrievers.cache import BUSY_TIMEOUT_S, plain_cell, set_up_wal, write_all

STORE_FILE = "semantic.sqlite"
STORE_FORMAT = 1


@dataclass(frozen=True)
class StoredEntry:
    query: str
    vector: np.ndarray
    hits: list[Hit]


def space_key(index_id: str, retriever: str, params: dict[str, Any], where: str | None) -> str:
    """The entries one (index, retriever and its parameters, document scope) shares."""
    return content_key("semantic", STORE_FORMAT, index_id, retriever, params, where, length=32)


class SemanticStore:
    """One folder's stored entries, read per space and appended to by ``add`` then ``flush``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._pending: list[tuple[str, str, bytes, int, str]] = []
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self.root.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.root / STORE_FILE, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                         check_same_thread=False)
            set_up_wal(connection)
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                               "space TEXT NOT NULL, query TEXT NOT NULL, vector BLOB NOT NULL, "
                               "dimensions INTEGER NOT NULL, hits TEXT NOT NULL, written REAL NOT NULL)")
            connection.execute("CREATE INDEX IF NOT EXISTS entries_space ON entries (space, seq)")
            self._connection = connection
        return self._connection

    def __getstate__(self) -> dict[str, Any]:
        """Sent to another process: the folder and what is not written yet."""
        return {"root": self.root, "_pending": list(self._pending)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["root"])  # type: ignore[misc]
        self._pending = state["_pending"]

    def entries(self, space: str) -> list[StoredEntry]:
        """The space's entries in the order they were written; a row that cannot be read is skipped
        (a cache: it is searched again)."""
        with self._lock:
            rows = self._db().execute("SELECT query, vector, dimensions, hits FROM entries WHERE space = ? "
                                      "ORDER BY seq", (space,)).fetchall()
        stored = []
        for query, blob, dimensions, hits_json in rows:
            try:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape != (int(dimensions),):
                    continue
                hits = [Hit({column: hit["row"][column] for column in CHUNK_COLUMNS}, float(hit["score"]))
                        for hit in json.loads(hits_json)]
            except (ValueError, KeyError, TypeError):
                continue
            stored.append(StoredEntry(str(query), vector, hits))
        return stored

    def add(self, space: str, query: str, vector: np.ndarray, hits: list[Hit]) -> None:
        array = np.asarray(vector, dtype=np.float32).ravel()
        rows = [{"row": {column: plain_cell(hit.row[column]) for column in CHUNK_COLUMNS}, "score": hit.score}
                for hit in hits]
        self._pending.append((space, query, array.tobytes(), int(array.shape[0]),
                              json.dumps(rows, ensure_ascii=False, default=str, separators=(",", ":"))))

    def flush(self) -> int:
        """Write the entries added since the last flush in one transaction; returns how many."""
        pending, self._pending = self._pending, []
        if not pending:
            return 0
        now = time.time()
        with self._lock:
            write_all(self._db(), "INSERT INTO entries (space, query, vector, dimensions, hits, written) "
                      "VALUES (?, ?, ?, ?, ?, ?)", [(*row, now) for row in pending])
        return len(pending)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
