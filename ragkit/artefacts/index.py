"""LanceDB indexes over one chunk set: vectors of one embedder (optional) and a full-text index.

An index is named by its content key (chunk set + embedder). It is built in a private staging
folder and published by one rename of its table folder, then its ``.ready`` marker is written; it
counts as built only once the marker exists. No table another process may read is ever removed:
only the holder of the index's content lock builds, and readers open nothing without the marker,
so a staging leftover or an unmarked table is a dead builder's, which the next builder clears.

Large tables get an approximate-nearest-neighbour index (``AnnParams``, from ``min_rows`` up), and
the full-text index can be left for later (``fulltext=False``, then ``ensure_fulltext``). The
marker records what was built, so a reader searches the way the table was built for.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragkit.storage.atomic import publish_dir, write_json_atomic

# Columns every index row carries; `vector` is added when the index has an embedder.
CHUNK_COLUMNS = ("chunk_id", "doc_id", "chunk_index", "start_char", "end_char", "text", "embed_text", "metadata")
FTS_COLUMN = "embed_text"


class AnnParams(BaseModel):
    """An approximate-nearest-neighbour index on the vectors of a large table (cosine distance).

    Below ``min_rows`` the table stays a flat, exact scan: an index would cost its training time
    and lose recall where a scan is already fast."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["none", "ivf_pq", "ivf_hnsw_sq"] = Field(
        default="none", description="Index type: none (exact scan), ivf_pq, or ivf_hnsw_sq.")
    min_rows: int = Field(
        default=100_000, ge=1, le=10**10, description="Rows from which the index is built; fewer stay exact.")
    num_partitions: int | None = Field(
        default=None, ge=1, le=1_000_000, description="IVF partitions; None = LanceDB's default (about sqrt(rows)).")
    num_sub_vectors: int | None = Field(
        default=None, ge=1, le=4096,
        description="PQ sub-vectors (must divide the dimension); None = LanceDB's default. ivf_pq only.")
    nprobes: int = Field(default=20, ge=1, le=1_000_000, description="IVF partitions searched per query.")
    refine_factor: int | None = Field(
        default=None, ge=1, le=1000,
        description="Re-rank refine_factor x limit candidates by their exact distance; None = no re-ranking.")
    ef: int | None = Field(
        default=None, ge=1, le=100_000,
        description="Candidates the HNSW graph search keeps per partition (higher: better recall, slower); "
                    "None = LanceDB's default (1.5 x the candidates asked for). Raised to the candidates asked "
                    "for (limit x refine_factor) where lower: LanceDB refuses an ef below them. ivf_hnsw_sq only.")

    @model_validator(mode="after")
    def _sub_vectors_need_pq(self) -> AnnParams:
        if self.num_sub_vectors is not None and self.kind != "ivf_pq":
            raise ValueError(f"num_sub_vectors applies to kind 'ivf_pq' only, got kind '{self.kind}'")
        if self.ef is not None and self.kind != "ivf_hnsw_sq":
            raise ValueError(f"ef applies to kind 'ivf_hnsw_sq' only, got kind '{self.kind}'")
        return self

    def id_fields(self) -> dict[str, Any]:
        """The parameters as index and run ids take them: ``ef`` only when set (unset, LanceDB's
        default applies), as for an added field (the run-id rule at ``ComponentParams.added_fields``)."""
        return self.model_dump(mode="json", exclude={"ef"} if self.ef is None else set())

    def apply_query_knobs(self, search: Any, limit: int) -> Any:
        """``search`` (a LanceDB vector or hybrid query for ``limit`` rows) with this index's
        query-time knobs."""
        search = search.nprobes(self.nprobes)
        if self.refine_factor is not None:
            search = search.refine_factor(self.refine_factor)
        if self.ef is not None:  # the graph search returns its ef best: LanceDB needs ef >= candidates
            search = search.ef(max(self.ef, limit * (self.refine_factor or 1)))
        return search


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
    observable. ``ann``: the parameters of the table's ANN index, None when dense search is exact;
    ``has_fulltext``: whether the table has its full-text index (see IndexStore.ensure_fulltext)."""

    def __init__(self, table: Any, has_vectors: bool, index_id: str = "", has_fulltext: bool = True,
                 ann: AnnParams | None = None) -> None:
        self._table = table
        self.has_vectors = has_vectors
        self.index_id = index_id
        self.has_fulltext = has_fulltext
        self.ann = ann
        self.searches = 0

    def __len__(self) -> int:
        return self._table.count_rows()

    def _require_vectors(self) -> None:
        if not self.has_vectors:
            raise ValueError("this index holds no vectors: build it with an embedder for dense, hybrid or mmr")

    def _require_fulltext(self) -> None:
        if not self.has_fulltext:
            raise ValueError(
                f"index {self.index_id!r} has no full-text index (built with fulltext=False): run "
                f"IndexStore.ensure_fulltext({self.index_id!r}) and reopen it before a bm25 or hybrid search")

    def _vector_search(self, query: Any, limit: int, with_vectors: bool, where: str | None) -> Any:
        search = self._table.search(query, query_type="vector").distance_type("cosine")
        if self.ann is not None:
            search = self.ann.apply_query_knobs(search, limit)
        if where is not None:
            search = search.where(where, prefilter=True)
        return search.select([*CHUNK_COLUMNS, *(["vector"] if with_vectors else []), "_distance"]).limit(limit)

    def dense(self, vector: np.ndarray, limit: int, with_vectors: bool = False, where: str | None = None) -> list[Hit]:
        self._require_vectors()
        self.searches += 1
        records = self._vector_search(vector.tolist(), limit, with_vectors, where).to_arrow().to_pylist()
        return [_dense_hit(record, with_vectors) for record in records]

    def dense_many(self, vectors: np.ndarray, limit: int, with_vectors: bool = False,
                   where: str | None = None) -> list[list[Hit]]:
        """``dense`` for each row of ``vectors``, in one LanceDB query (one search counted per vector)."""
        self._require_vectors()
        if len(vectors) == 0:
            return []
        if len(vectors) == 1:  # a single query vector comes back without a query_index column
            return [self.dense(vectors[0], limit, with_vectors, where)]
        self.searches += len(vectors)
        records = self._vector_search([v.tolist() for v in vectors], limit, with_vectors, where).to_arrow().to_pylist()
        hits: list[list[Hit]] = [[] for _ in range(len(vectors))]
        for record in records:  # each query's rows come in its own best-first order
            hits[int(record["query_index"])].append(_dense_hit(record, with_vectors))
        return hits

    def fulltext(self, query: str, limit: int, where: str | None = None) -> list[Hit]:
        self._require_fulltext()
        self.searches += 1
        search = self._table.search(query, query_type="fts", fts_columns=FTS_COLUMN)
        if where is not None:
            search = search.where(where, prefilter=True)
        records = search.select([*CHUNK_COLUMNS, "_score"]).limit(limit).to_arrow().to_pylist()
        return [Hit(_row(rec), float(rec["_score"])) for rec in records]

    def hybrid(self, query: str, vector: np.ndarray, limit: int, rrf_k: int, where: str | None = None) -> list[Hit]:
        """Reciprocal rank fusion of the top ``limit`` dense and full-text hits (LanceDB's RRFReranker)."""
        from lancedb.rerankers import RRFReranker

        self._require_vectors()
        self._require_fulltext()
        self.searches += 1
        builder = (
            self._table.search(query_type="hybrid", fts_columns=FTS_COLUMN)
            .vector(vector.tolist())
            .text(query)
            .distance_type("cosine")
        )
        if self.ann is not None:
            builder = self.ann.apply_query_knobs(builder, limit)
        if where is not None:
            builder = builder.where(where, prefilter=True)
        # No select(): LanceDB would pass it to both sub-queries, and each then logs a warning per
        # query for leaving out its score column. The vectors of `limit` rows are dropped unconverted.
        rows = builder.rerank(RRFReranker(K=rrf_k)).limit(limit).to_arrow()
        records = rows.select([*CHUNK_COLUMNS, "_relevance_score"]).to_pylist()
        return [Hit(_row(rec), float(rec["_relevance_score"])) for rec in records]

    def chunks(self, where: str, with_vectors: bool = False) -> list[Hit]:
        """Every chunk matching ``where`` (a scan, not a search: not counted), in document order;
        score 0. Context enrichment reads a hit's neighbours and section with it."""
        columns = [*CHUNK_COLUMNS, *(["vector"] if with_vectors and self.has_vectors else [])]
        frame = self._table.search().where(where).select(columns).limit(None).to_pandas()
        hits = [Hit(_row(rec), 0.0, np.asarray(rec["vector"], np.float32) if "vector" in rec else None)
                for rec in frame.to_dict("records")]
        return sorted(hits, key=lambda hit: (str(hit.row["doc_id"]), int(hit.row["chunk_index"])))


def _dense_hit(record: dict[str, Any], with_vectors: bool) -> Hit:
    vector = np.asarray(record["vector"], np.float32) if with_vectors else None
    return Hit(_row(record), 1.0 - float(record["_distance"]), vector)


def _row(record: dict[str, Any]) -> dict[str, Any]:
    return {column: record[column] for column in CHUNK_COLUMNS}


def index_marker(db_dir: Path, index_id: str) -> Path:
    """The file whose presence says the index is built (a dry run reads it without opening LanceDB)."""
    return db_dir / f"chunks_{index_id}.ready"


class IndexStore:
    """The LanceDB database of one corpus' derived folder."""

    def __init__(self, db_dir: Path) -> None:
        self.db_dir = db_dir
        db_dir.mkdir(parents=True, exist_ok=True)
        self._connection: Any = None

    @property
    def _db(self) -> Any:
        """The LanceDB connection, opened on first use: importing lancedb costs seconds, and a
        re-run of a finished experiment never opens a table."""
        if self._connection is None:
            import lancedb

            self._connection = lancedb.connect(self.db_dir)
        return self._connection

    def _marker(self, index_id: str) -> Path:
        return index_marker(self.db_dir, index_id)

    def is_ready(self, index_id: str) -> bool:
        return self._marker(index_id).exists()

    def _read_marker(self, index_id: str) -> dict[str, Any]:
        """What the build recorded; a marker written before ANN and optional full-text indexes
        existed means: exact search, full-text index built."""
        try:
            marker = json.loads(self._marker(index_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise KeyError(f"index {index_id} is not built") from None
        return {"ann": None, "ann_built": False, "fulltext": True, **marker}

    def has_fulltext(self, index_id: str) -> bool:
        return bool(self._read_marker(index_id)["fulltext"])

    def open(self, index_id: str) -> ChunkIndex:
        marker = self._read_marker(index_id)
        table = self._db.open_table(f"chunks_{index_id}")
        ann = AnnParams.model_validate(marker["ann"]) if marker["ann_built"] else None
        return ChunkIndex(table, has_vectors="vector" in table.schema.names, index_id=index_id,
                          has_fulltext=bool(marker["fulltext"]), ann=ann)

    def build(self, index_id: str, chunks: pd.DataFrame, vectors: np.ndarray | None,
              before_publish: Callable[[], None] | None = None, ann: AnnParams | None = None,
              fulltext: bool = True) -> ChunkIndex:
        """Build and publish the index; the caller holds the index's content lock.

        ``before_publish`` runs once the table is complete but not yet visible (the
        executor records the build's cost there, so a built index always has its cost recorded).
        ``ann``: an ANN index on the vectors once the table has ``ann.min_rows`` rows (exact
        search below); ``fulltext=False`` leaves the full-text index to ``ensure_fulltext``."""
        return self.build_from_batches(index_id, _streamed(index_rows(chunks, vectors)), before_publish, ann, fulltext)

    def build_from_batches(self, index_id: str, batches: Any, before_publish: Callable[[], None] | None = None,
                           ann: AnnParams | None = None, fulltext: bool = True) -> ChunkIndex:
        """``build`` from a ``pyarrow.RecordBatchReader`` of the rows ``index_rows`` makes: LanceDB
        writes them as they come (one commit), so a streamed build never holds the whole table."""
        import lancedb

        name = f"chunks_{index_id}"
        staging_root = self.db_dir / ".building"
        for leftover in staging_root.glob(f"{index_id}-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging = staging_root / f"{index_id}-{uuid.uuid4().hex[:8]}"
        table = lancedb.connect(staging).create_table(name, data=batches)
        rows = table.count_rows()
        has_vectors = "vector" in table.schema.names
        large = ann is not None and ann.kind != "none" and has_vectors and rows >= ann.min_rows
        ann_built = ann if large else None
        if ann_built is not None:
            _create_vector_index(table, ann_built)
        if fulltext:
            _create_fulltext_index(table)
        if before_publish is not None:
            before_publish()
        published = self.db_dir / f"{name}.lance"
        shutil.rmtree(published, ignore_errors=True)  # an unmarked table: a dead builder's, read by no one
        publish_dir(staging / f"{name}.lance", published)
        shutil.rmtree(staging, ignore_errors=True)
        write_json_atomic(self._marker(index_id), {
            "rows": rows, "vectors": has_vectors, "ann": ann.model_dump() if ann is not None else None,
            "ann_built": ann_built is not None, "fulltext": fulltext,
        })
        return self.open(index_id)

    def ensure_fulltext(self, index_id: str, before_mark: Callable[[float], None] | None = None) -> float | None:
        """Give a published index its full-text index if it was built without one; the seconds it
        took, or None if it had one. The caller holds the index's content lock.

        ``before_mark(seconds)`` runs once the index exists but before the marker says so (the
        executor records the build's cost there: a marker saying "built" always has its cost
        recorded, whenever the process is killed).
        The index is a new LanceDB version of the published table: readers keep the version they
        opened, and a ChunkIndex opened before this call still has no full-text search (reopen it).
        A crash between the index and the marker leaves the marker saying "none", and the next call
        builds the index again (``replace=True``)."""
        marker = self._read_marker(index_id)
        if marker["fulltext"]:
            return None
        started = time.perf_counter()
        _create_fulltext_index(self._db.open_table(f"chunks_{index_id}"))
        seconds = time.perf_counter() - started
        if before_mark is not None:
            before_mark(seconds)
        write_json_atomic(self._marker(index_id), {**marker, "fulltext": True})
        return seconds


def index_rows(chunks: pd.DataFrame, vectors: np.ndarray | None) -> Any:
    """The table's rows as Arrow, the vectors one fixed-size-list column over their float32
    buffer. A pandas column of one small array per row costs a Python object each: at 200k rows
    that was 2.8x slower to write and 560 MB more at peak, for the same table."""
    import pyarrow as pa

    table = pa.Table.from_pandas(chunks.loc[:, list(CHUNK_COLUMNS)], preserve_index=False)
    if vectors is None:
        return table
    flat = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1)
    return table.append_column("vector", pa.FixedSizeListArray.from_arrays(pa.array(flat), vectors.shape[1]))


# Rows per batch LanceDB is handed when it writes a table.
WRITE_BATCH_ROWS = 8_192


def index_row_batches(chunks: pd.DataFrame, vectors: np.ndarray | None) -> list[Any]:
    """``index_rows`` as record batches of ``WRITE_BATCH_ROWS`` (a streamed build's window)."""
    return index_rows(chunks, vectors).to_batches(max_chunksize=WRITE_BATCH_ROWS)


def _streamed(table: Any) -> Any:
    """``table`` as a reader of small record batches. Handed a whole Arrow table, LanceDB holds
    copies of it while writing: 200k chunks (408 MB) peaked 1.1 GB above the table and kept 580 MB,
    against 0.1 GB and 2.8x less time as batches, for the same table (one fragment either way)."""
    import pyarrow as pa

    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=WRITE_BATCH_ROWS))


def _create_fulltext_index(table: Any) -> None:
    from lancedb.index import FTS

    table.create_index(FTS_COLUMN, config=FTS(language="English", stem=True, remove_stop_words=True), replace=True)


def _create_vector_index(table: Any, ann: AnnParams) -> None:
    from lancedb.index import HnswSq, IvfPq

    options: dict[str, Any] = {"distance_type": "cosine"}
    if ann.num_partitions is not None:
        options["num_partitions"] = ann.num_partitions
    if ann.kind == "ivf_pq":
        if ann.num_sub_vectors is not None:
            options["num_sub_vectors"] = ann.num_sub_vectors
        config: Any = IvfPq(**options)
    else:
        config = HnswSq(**options)
    table.create_index("vector", config=config, replace=True)
