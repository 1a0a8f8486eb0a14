"""The retrieval cache: a search answered once per (index, retriever, parameters, query, scope).

Content-addressed like every other cache: the key is the hash of the index id (its chunk set
and embedder), the retriever's type and parameters as they enter run ids, the query and the
scope's filter, so a sibling configuration (the same retriever under other judges) and a re-run
read the hits instead of searching. An entry is JSON (no pickle) and also keeps the seconds the
search took, which a hit reports as replayed, so latency tables still show what retrieval costs
a configuration.

Entries live in one SQLite table (``ROOT/retrievals.sqlite``) rather than a file per search.
SQLite, not LanceDB or parquet appends, because several processes write at once (parallel
workers, two ``ragkit run`` on one data dir): SQLite serialises writers with its own file lock
and a busy timeout, each flush is one transaction (all of it or none of it, never a half row),
and WAL mode lets readers go on while one writes. LanceDB appends from several processes can
conflict at commit; parquet appends need our own locking and compaction.

Entries written by older versions (``ROOT/ab/<key>.json``, a file per search) are still read;
new entries go to the table only. Writes wait until ``flush`` (the executor flushes after each
question), so writing is never timed as part of a retrieval step; a crash before it only loses
cache entries.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.artefacts.index import CHUNK_COLUMNS, Hit
from ragkit.caches.keys import RETRIEVAL, CacheKeyLog
from ragkit.hashing import content_key

CACHE_FORMAT = 1
TABLE_FILE = "retrievals.sqlite"
# How long a writer waits for another process' transaction before giving up (seconds).
BUSY_TIMEOUT_S = 60.0


def connect(root: Path) -> sqlite3.Connection:
    """The cache table of ``root``, created if missing (also used by ``ragkit cache``)."""
    root.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(root / TABLE_FILE, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                 check_same_thread=False)  # shared by threads under RetrievalCache's lock
    set_up_wal(connection)
    # No fsync per commit (WAL stays consistent; a power loss may only drop the last flushes,
    # which a cache recomputes), as the file-per-search layout did not fsync either.
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE IF NOT EXISTS retrievals "
                       "(key TEXT PRIMARY KEY, entry TEXT NOT NULL, written REAL NOT NULL)")
    return connection


def set_up_wal(connection: sqlite3.Connection) -> None:
    """Switch ``connection``'s database to WAL, waiting for another process that is doing the same.

    Changing the journal mode needs the database to itself, and SQLite answers "database is
    locked" at once, without its busy timeout, while another process creates the file or switches
    it too (two workers opening a fresh cache at the same moment), so we wait here ourselves."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class RetrievalCache:
    def __init__(self, root: Path, key_log: CacheKeyLog | None = None) -> None:
        self.root = Path(root)
        self.key_log = key_log  # notes each key read or written, for the results folder's record
        self._pending: dict[str, dict[str, Any]] = {}
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # one connection, shared by the executor's threads
        self._pid = os.getpid()

    @staticmethod
    def key(index_id: str, retriever: str, params: dict[str, Any], query: str, where: str | None) -> str:
        return content_key("retrieval", index_id, retriever, params, query, where, length=32)

    def _db(self) -> sqlite3.Connection:
        if self._connection is None or self._pid != os.getpid():  # a forked child opens its own
            self._connection, self._pid = connect(self.root), os.getpid()
        return self._connection

    def __getstate__(self) -> dict[str, Any]:
        """Sent to another process (Ray, multiprocessing): the folder and pending entries only
        (not the key log: the receiving process records into its own)."""
        return {"root": self.root, "_pending": dict(self._pending)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["root"])  # type: ignore[misc]
        self._pending = state["_pending"]

    def _legacy_path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _stored(self, key: str) -> dict[str, Any] | None:
        try:
            with self._lock:
                row = self._db().execute("SELECT entry FROM retrievals WHERE key = ?", (key,)).fetchone()
            if row is not None:
                return json.loads(row[0])
        except (sqlite3.Error, ValueError):
            pass  # an unreadable table or row: fall back to the old files, else search again
        try:
            return json.loads(self._legacy_path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # missing or unreadable: searched again and rewritten

    def get(self, key: str) -> tuple[list[Hit], float] | None:
        if self.key_log is not None:
            self.key_log.note(RETRIEVAL, key)
        entry = self._pending.get(key) or self._stored(key)
        if entry is None:
            return None
        try:
            if entry.get("format") != CACHE_FORMAT or entry.get("key") != key:
                return None
            hits = [Hit({column: hit["row"][column] for column in CHUNK_COLUMNS}, float(hit["score"]))
                    for hit in entry["hits"]]
            return hits, float(entry["seconds"])
        except (AttributeError, KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, hits: list[Hit], seconds: float) -> None:
        if self.key_log is not None:
            self.key_log.note(RETRIEVAL, key)
        self._pending[key] = {"format": CACHE_FORMAT, "key": key, "seconds": seconds,
                              "hits": [{"row": {c: plain_cell(hit.row[c]) for c in CHUNK_COLUMNS}, "score": hit.score}
                                       for hit in hits]}

    def flush(self) -> int:
        """Write the entries added since the last flush in one transaction; returns how many."""
        pending, self._pending = self._pending, {}
        if not pending:
            return 0
        now = time.time()
        rows = [(key, json.dumps(entry, ensure_ascii=False, default=str, separators=(",", ":")), now)
                for key, entry in pending.items()]
        with self._lock:
            write_all(self._db(), "INSERT OR REPLACE INTO retrievals (key, entry, written) VALUES (?, ?, ?)", rows)
        return len(pending)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def write_all(connection: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """``sql`` for every row in one write transaction, taken at once (``BEGIN IMMEDIATE``, so a
    concurrent writer waits on the busy timeout rather than failing mid-way); all rows or none."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(sql, rows)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def plain_cell(value: Any) -> Any:
    """A LanceDB/pandas cell as plain JSON (numpy integers and floats as Python numbers)."""
    if isinstance(value, np.generic):
        return value.item()
    return value
