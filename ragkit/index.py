"""LanceDB indexes over one chunk set: vectors of one embedder (optional) and a full-text index.

An index is named by its content key (chunk set + embedder). It is built in a private staging
folder and published by one rename of its table folder, then its ``.ready`` marker is written; it
counts as built only once the marker exists. No table another process may read is ever removed:
only the holder of the index's content lock builds, and readers open nothing without the marker,
so a staging leftover or an unmarked table is a dead builder's, which the next builder clears.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.atomic import publish_dir, write_json_atomic

# Columns every index row carries; `vector` is added when the index has an embedder.
CHUNK_COLUMNS = ("chunk_id", "doc_id", "chunk_index", "start_char", "end_char", "text", "embed_text", "metadata")
FTS_COLUMN = "embed_text"


@dataclass
class Hit:
    """One retrieved chunk: its index row, a score where higher is better, and its vector if asked."""

    row: dict[str, Any]
    score: float
    vector: np.ndarray | None = field(default=None, repr=False)


def sql_text(value: str) -> str:
    """``value`` as an SQL string literal: quotes doubled (document ids are file names)."""
    return "'" + value.replace("'", "''") + "'"


def doc_filter(doc_ids: Sequence[str]) -> str:
    """A LanceDB ``where`` clause keeping the chunks of ``doc_ids``."""
    return f"doc_id IN ({', '.join(sql_text(doc_id) for doc_id in sorted(set(doc_ids)))})"


class ChunkIndex:
    """``where``: an SQL filter applied before the search (LanceDB prefilter), e.g. doc_filter(...).

    ``searches`` counts the searches run (dense, full-text, hybrid), so a cache's effect is
    observable."""

    def __init__(self, table: Any, has_vectors: bool, index_id: str = "") -> None:
        self._table = table
        self.has_vectors = has_vectors
        self.index_id = index_id
        self.searches = 0

    def __len__(self) -> int:
        return self._table.count_rows()

    def _require_vectors(self) -> None:
        if not self.has_vectors:
            raise ValueError("this index holds no vectors: build it with an embedder for dense, hybrid or mmr")

    def dense(self, vector: np.ndarray, limit: int, with_vectors: bool = False, where: str | None = None) -> list[Hit]:
        self._require_vectors()
        self.searches += 1
        search = self._table.search(vector.tolist(), query_type="vector").distance_type("cosine")
        if where is not None:
            search = search.where(where, prefilter=True)
        frame = search.limit(limit).to_pandas()
        return [
            Hit(
                _row(rec),
                1.0 - float(rec["_distance"]),
                np.asarray(rec["vector"], np.float32) if with_vectors else None,
            )
            for rec in frame.to_dict("records")
        ]

    def fulltext(self, query: str, limit: int, where: str | None = None) -> list[Hit]:
        self.searches += 1
        search = self._table.search(query, query_type="fts", fts_columns=FTS_COLUMN)
        if where is not None:
            search = search.where(where, prefilter=True)
        frame = search.limit(limit).to_pandas()
        return [Hit(_row(rec), float(rec["_score"])) for rec in frame.to_dict("records")]

    def hybrid(self, query: str, vector: np.ndarray, limit: int, rrf_k: int, where: str | None = None) -> list[Hit]:
        """Reciprocal rank fusion of the top ``limit`` dense and full-text hits (LanceDB's RRFReranker)."""
        from lancedb.rerankers import RRFReranker

        self._require_vectors()
        self.searches += 1
        builder = (
            self._table.search(query_type="hybrid", fts_columns=FTS_COLUMN)
            .vector(vector.tolist())
            .text(query)
            .distance_type("cosine")
        )
        if where is not None:
            builder = builder.where(where, prefilter=True)
        frame = builder.rerank(RRFReranker(K=rrf_k)).limit(limit).to_pandas()
        return [Hit(_row(rec), float(rec["_relevance_score"])) for rec in frame.to_dict("records")]

    def chunks(self, where: str, with_vectors: bool = False) -> list[Hit]:
        """Every chunk matching ``where`` (a scan, not a search: not counted), in document order;
        score 0. Context enrichment reads a hit's neighbours and section with it."""
        columns = [*CHUNK_COLUMNS, *(["vector"] if with_vectors and self.has_vectors else [])]
        frame = self._table.search().where(where).select(columns).limit(None).to_pandas()
        hits = [Hit(_row(rec), 0.0, np.asarray(rec["vector"], np.float32) if "vector" in rec else None)
                for rec in frame.to_dict("records")]
        return sorted(hits, key=lambda hit: (str(hit.row["doc_id"]), int(hit.row["chunk_index"])))


def _row(record: dict[str, Any]) -> dict[str, Any]:
    return {column: record[column] for column in CHUNK_COLUMNS}


class IndexStore:
    """The LanceDB database of one corpus' derived folder."""

    def __init__(self, db_dir: Path) -> None:
        import lancedb

        self.db_dir = db_dir
        db_dir.mkdir(parents=True, exist_ok=True)
        self._db = lancedb.connect(db_dir)

    def _marker(self, index_id: str) -> Path:
        return self.db_dir / f"chunks_{index_id}.ready"

    def is_ready(self, index_id: str) -> bool:
        return self._marker(index_id).exists()

    def open(self, index_id: str) -> ChunkIndex:
        if not self.is_ready(index_id):
            raise KeyError(f"index {index_id} is not built")
        table = self._db.open_table(f"chunks_{index_id}")
        return ChunkIndex(table, has_vectors="vector" in table.schema.names, index_id=index_id)

    def build(self, index_id: str, chunks: pd.DataFrame, vectors: np.ndarray | None,
              before_publish: Callable[[], None] | None = None) -> ChunkIndex:
        """Build and publish the index; the caller holds the index's content lock.

        ``before_publish`` runs once the table is complete but not yet visible (the
        executor records the build's cost there, so a built index always has its cost recorded)."""
        import lancedb
        from lancedb.index import FTS

        name = f"chunks_{index_id}"
        staging_root = self.db_dir / ".building"
        for leftover in staging_root.glob(f"{index_id}-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging = staging_root / f"{index_id}-{uuid.uuid4().hex[:8]}"
        data = chunks.loc[:, list(CHUNK_COLUMNS)].copy()
        if vectors is not None:
            data["vector"] = list(vectors.astype(np.float32))
        table = lancedb.connect(staging).create_table(name, data=data)
        table.create_index(FTS_COLUMN, config=FTS(language="English", stem=True, remove_stop_words=True), replace=True)
        if before_publish is not None:
            before_publish()
        published = self.db_dir / f"{name}.lance"
        shutil.rmtree(published, ignore_errors=True)  # an unmarked table: a dead builder's, read by no one
        publish_dir(staging / f"{name}.lance", published)
        shutil.rmtree(staging, ignore_errors=True)
        write_json_atomic(self._marker(index_id), {"rows": len(data), "vectors": vectors is not None})
        return self.open(index_id)
