"""The per-embedder cache of vectors that makes each text embed once, across runs and processes."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Container, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragkit.artefacts.index import sql_text
from ragkit.embedders.base import Embedder
from ragkit.storage.atomic import publish_dir


class EmbeddingCache:
    """Vectors of one embedder keyed by the SHA-256 of the embedded text, in LanceDB.

    Append-only: the table is never dropped or rewritten in place, so a process reading it never
    loses the files under its feet. It is created whole (built in a staging folder, published by
    one rename) and then grows by one LanceDB commit per ``add``, so a crash keeps every committed
    batch and never a partial one. ``embed_with_cache`` commits every ``COMMIT_ROWS`` vectors or
    ``COMMIT_SECONDS``, whichever comes first, not every model batch: each commit is a LanceDB
    version whose manifest lists every fragment, so manifests grow quadratically with the number
    of commits (figures: benchmarks/README.md, "ragkit's own costs at a million chunks"). Writers
    hold the embedder's content lock (the executor takes it around lookup, embedding and
    appending), so each text is embedded once across processes.

    A lookup of a few keys reads only their rows (the filter runs inside LanceDB, helped by a BTREE
    index on ``text_sha`` once the table holds ``KEY_INDEX_MIN_ROWS``); a lookup of a good part of
    the table scans its key column and reads the vectors of the keys found. Only a lookup of at
    least half the table (a re-run over a whole chunk set) reads it all, in one sequential pass.
    """

    # Keys per filtered query: a few thousand 64-character keys make a filter of about 150 kB.
    LOOKUP_BATCH: ClassVar[int] = 2_000
    # Asking for more than 1/SCAN_RATIO of the table: one scan of the key column beats
    # LOOKUP_BATCH-key queries (10k keys of 100k rows: 0.14 s against 0.27 s).
    SCAN_RATIO: ClassVar[int] = 20
    # Asking for half the table or more: one sequential read of it beats any search.
    READ_ALL_RATIO: ClassVar[int] = 2
    # Below this a filtered scan of the key column takes milliseconds; the index would only cost disk.
    KEY_INDEX_MIN_ROWS: ClassVar[int] = 50_000
    # Vectors per commit (1M rows: about 250 versions), and the longest a computed vector waits
    # for its commit: a crash loses at most this much embedding work.
    COMMIT_ROWS: ClassVar[int] = 4_096
    COMMIT_SECONDS: ClassVar[float] = 30.0
    # Keys tested at once by a key scan. Each ``is_in`` call hashes the wanted keys again, and
    # LanceDB yields about 1,000 rows a batch, so large groups scan far faster for a few MB of keys
    # (benchmarks/README.md, "Figures behind choices in the code").
    SCAN_GROUP_ROWS: ClassVar[int] = 262_144

    def __init__(self, db_dir: Path, embedder_key: str) -> None:
        import lancedb

        self._db_dir = Path(db_dir)
        self._db = lancedb.connect(db_dir)
        self._table_name = f"embeddings_{embedder_key}"

    def _table(self) -> Any:
        try:
            return self._db.open_table(self._table_name)
        except ValueError:  # LanceDB's "table not found"
            return None

    def lookup(self, text_keys: Sequence[str]) -> dict[str, np.ndarray]:
        table = self._table()
        if table is None or not text_keys:
            return {}
        wanted = set(text_keys)
        rows = table.count_rows()
        if self.READ_ALL_RATIO * len(wanted) >= rows:
            everything = table.search().select(["text_sha", "vector"]).limit(None).to_arrow()
            return {key: vector for key, vector in _key_vectors(everything) if key in wanted}
        unindexed = rows >= self.KEY_INDEX_MIN_ROWS and not _has_index_on(table, "text_sha")
        if self.SCAN_RATIO * len(wanted) >= rows or unindexed:
            # A large table without its key index (before ``compact``: a streamed build's later
            # windows) makes every filtered query scan the key column: one scan serves all keys.
            return dict(_key_vectors(self._rows_by_key_scan(table, wanted)))
        found: dict[str, np.ndarray] = {}
        ordered = sorted(wanted)
        for start in range(0, len(ordered), self.LOOKUP_BATCH):
            keys = ordered[start : start + self.LOOKUP_BATCH]
            matches = (
                table.search()
                .where(f"text_sha IN ({', '.join(sql_text(key) for key in keys)})")
                .select(["text_sha", "vector"])
                .limit(None)
                .to_arrow()
            )
            found.update(_key_vectors(matches))
        return found

    @classmethod
    def _rows_by_key_scan(cls, table: Any, wanted: set[str]) -> pa.Table:
        """The rows of ``wanted`` found by scanning the key column alone, then taking only their
        vectors by row id: faster than thousands of filtered queries for a good part of the table."""
        value_set = pa.array(list(wanted), type=pa.string())
        row_ids: list[int] = []
        held: list[pa.RecordBatch] = []

        def test_held() -> None:
            keys = pa.concat_arrays([batch.column("text_sha") for batch in held])
            ids = pa.concat_arrays([batch.column("_rowid") for batch in held])
            row_ids.extend(ids.filter(pc.is_in(keys, value_set=value_set)).to_pylist())
            held.clear()

        # SCAN_GROUP_ROWS at a time, not the whole column: the key column of a 3M-row table is
        # about 230 MB, read for each window of a streamed build.
        held_rows = 0
        for batch in table.search().select(["text_sha"]).with_row_id(True).limit(None).to_batches():
            held.append(batch)
            held_rows += len(batch)
            if held_rows >= cls.SCAN_GROUP_ROWS:
                test_held()
                held_rows = 0
        if held:
            test_held()
        # Row ids hold for the version this table object read, which both queries use.
        return table.take_row_ids(row_ids).select(["text_sha", "vector"]).to_arrow()

    def add(self, text_keys: Sequence[str], vectors: np.ndarray) -> None:
        rows = _cache_rows(text_keys, vectors)
        table = self._table()
        if table is None:
            if self._create(rows):
                return
            table = self._table()
        table.add(rows)

    def compact(self) -> None:
        """Merge the fragments left by one commit per ``add`` and index the keys of a large table.

        A writer's step: the caller holds the embedder's content lock. ``optimize`` rewrites
        nothing in place, which keeps the promise to readers: Lance commits the merged fragments
        as a new version, and every file of an older version stays on disk as long as its
        manifest does. Old versions are pruned only once older than LanceDB's default
        ``cleanup_older_than`` (7 days), and a reader opens the latest version when it opens the
        table, so only a reader holding one table open for a week could miss a file.
        """
        from lancedb.index import BTree

        table = self._table()
        if table is None:
            return
        if table.count_rows() >= self.KEY_INDEX_MIN_ROWS and not _has_index_on(table, "text_sha"):
            table.create_index("text_sha", config=BTree())
        table.optimize()  # also folds the rows appended since into the key index

    def _create(self, rows: pa.Table) -> bool:
        """Publish a new table holding ``rows``; False if another writer published one first."""
        import lancedb

        staging = self._db_dir / ".building" / f"{self._table_name}-{uuid.uuid4().hex[:8]}"
        published = self._db_dir / f"{self._table_name}.lance"
        try:
            lancedb.connect(staging).create_table(self._table_name, data=rows)
            publish_dir(staging / f"{self._table_name}.lance", published)
        except OSError:
            if not published.exists():
                raise
            return False
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return True


def _cache_rows(text_keys: Sequence[str], vectors: np.ndarray) -> pa.Table:
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or len(matrix) != len(text_keys):
        raise ValueError(f"{len(text_keys)} keys need a matrix of {len(text_keys)} vectors, got shape {matrix.shape}")
    flat = pa.array(matrix.reshape(-1), type=pa.float32())
    return pa.table({
        "text_sha": pa.array(list(text_keys), type=pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(flat, matrix.shape[1]),
    })


def _key_vectors(rows: pa.Table) -> Iterator[tuple[str, np.ndarray]]:
    """(key, float32 vector) for each row, the vectors viewing the Arrow buffers (no per-row copy)."""
    for batch in rows.to_batches():
        if batch.num_rows == 0:
            continue
        values = pc.list_flatten(batch.column("vector")).to_numpy(zero_copy_only=False)
        matrix = np.asarray(values, dtype=np.float32).reshape(batch.num_rows, -1)
        yield from zip(batch.column("text_sha").to_pylist(), matrix)


def _has_index_on(table: Any, column: str) -> bool:
    return any(column in index.columns for index in table.list_indices())


def embed_with_cache(
    embedder: Embedder,
    texts: Sequence[str],
    text_keys: Sequence[str],
    cache: EmbeddingCache,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
    compact: bool = True,
) -> tuple[np.ndarray, int]:
    """Vectors for ``texts`` in order, computing only those the cache lacks.

    Returns the vectors and how many texts were embedded now (0 on a re-run). Every vector
    computed is committed before it returns. ``compact=False`` leaves ``cache.compact()`` to the
    caller: a streamed build calls this once per window and compacts once at its end.
    """
    known = cache.lookup(text_keys)
    pending = missing_texts(texts, text_keys, known)
    known.update(embed_pending(embedder, pending, batch_size, cache.add, cache, progress))
    if pending and compact:
        cache.compact()
    return np.stack([known[key] for key in text_keys]) if text_keys else np.zeros((0, 0), np.float32), len(pending)


def missing_texts(texts: Sequence[str], text_keys: Sequence[str], known: Container[str],
                  skip: Container[str] = frozenset()) -> list[tuple[str, str]]:
    """(key, text) of each text neither ``known`` nor in ``skip``, once, in the order the model
    embeds them. Shortest first: a batch is padded to its longest text, so batches of similar
    lengths waste little; the sort is stable, so equal
    lengths keep their first occurrence's order and two callers given the same texts make the
    same batches (a Ray window step and the in-process build of that window)."""
    missing: dict[str, str] = {}
    for key, text in zip(text_keys, texts):
        if key not in known and key not in skip and key not in missing:
            missing[key] = text
    return sorted(missing.items(), key=lambda item: len(item[1]))


def embed_pending(embedder: Embedder, pending: Sequence[tuple[str, str]], batch_size: int,
                  commit: Callable[[list[str], np.ndarray], None], cache: EmbeddingCache,
                  progress: Callable[[int], None] | None = None) -> dict[str, np.ndarray]:
    """Embed ``pending`` (``missing_texts``) in batches of ``batch_size``, handing the vectors to
    ``commit`` every ``cache.COMMIT_ROWS`` vectors or ``cache.COMMIT_SECONDS``, whichever comes
    first, and after the last batch; returns every vector computed, by key."""
    computed: dict[str, np.ndarray] = {}
    uncommitted: list[str] = []
    last_commit = time.monotonic()
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        vectors = embedder.embed_texts([text for _, text in batch])
        computed.update({key: vec for (key, _), vec in zip(batch, vectors)})
        uncommitted += [key for key, _ in batch]
        last = start + batch_size >= len(pending)
        if last or len(uncommitted) >= cache.COMMIT_ROWS or time.monotonic() - last_commit >= cache.COMMIT_SECONDS:
            commit(uncommitted, np.stack([computed[key] for key in uncommitted]))
            uncommitted, last_commit = [], time.monotonic()
        if progress is not None:
            progress(len(batch))
    return computed
