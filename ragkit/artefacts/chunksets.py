"""Chunk sets: a corpus cut by one chunker, stored once as Parquet under its content key."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pandas as pd

from ragkit.corpus.model import Corpus
from ragkit.hashing import text_sha256
from ragkit.storage.atomic import write_atomic, write_json_atomic, write_parquet_atomic

# Node metadata that has its own column (or is recomputed) rather than living in `metadata`.
_OWN_COLUMNS = ("doc_id", "start_char", "end_char", "chunk_index", "embed_text")

# Documents chunked at a time by a streamed build: their nodes are the only ones in memory.
STREAM_DOCUMENTS = 1_000

# The default lock: none. nullcontext keeps no state, so one instance serves every call.
_NO_LOCK: AbstractContextManager[None] = nullcontext()


def chunkset_path(derived_dir: Path, chunkset_id: str) -> Path:
    return derived_dir / "chunksets" / f"{chunkset_id}.parquet"


def decisions_path(derived_dir: Path, chunkset_id: str) -> Path:
    """The Chunking Judge's per-document decisions, kept beside the chunk set they made."""
    return derived_dir / "chunksets" / f"{chunkset_id}.decisions.json"


def chunk_corpus(corpus: Corpus, chunker: Any) -> pd.DataFrame:
    """One row per chunk with exact offsets into its document and the text to embed."""
    return chunk_frame(chunker.chunk(list(corpus.documents)))


def chunk_judged(corpus: Corpus, decide: Callable[[Any], tuple[Any, Any]],
                 build_chunker: Callable[[Any], Any]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Each document cut by the chunker the judge chose for it; returns the chunks and one
    decision row per document (with the document id) for the judgements table."""
    decisions: list[dict[str, Any]] = []
    nodes = _judged_nodes(corpus.documents, decide, build_chunker, {}, decisions)
    return chunk_frame(nodes), decisions


def judged_frames(corpus: Corpus, decide: Callable[[Any], tuple[Any, Any]], build_chunker: Callable[[Any], Any],
                  decisions: list[dict[str, Any]]) -> Iterator[pd.DataFrame]:
    """``chunk_judged`` a batch of ``STREAM_DOCUMENTS`` documents at a time: the judge decides per
    document, so a batch's frame is its rows of the whole frame. Decisions are appended to
    ``decisions`` (one small dict a document, kept: they are the judgements table's rows)."""
    built: dict[str, Any] = {}  # one chunker per chosen spec for the whole corpus, as chunk_judged
    for batch in corpus.batches(STREAM_DOCUMENTS):
        yield chunk_frame(_judged_nodes(batch, decide, build_chunker, built, decisions))


def _judged_nodes(documents: Iterable[Any], decide: Callable[[Any], tuple[Any, Any]],
                  build_chunker: Callable[[Any], Any], built: dict[str, Any],
                  decisions: list[dict[str, Any]]) -> list[Any]:
    nodes: list[Any] = []
    for document in documents:
        spec, judgement = decide(document)
        key = spec.model_dump_json()
        if key not in built:
            built[key] = build_chunker(spec)
        nodes += built[key].chunk([document])
        if judgement is not None:
            decisions.append({**judgement.as_row(), "doc_id": document.id_})
    return nodes


def chunk_frame(nodes: list[Any]) -> pd.DataFrame:
    rows = []
    for node in nodes:
        meta = node.metadata
        embed_text = meta.get("embed_text") or node.text
        rows.append(
            {
                "chunk_id": node.node_id,
                "doc_id": meta["doc_id"],
                "chunk_index": int(meta["chunk_index"]),
                "start_char": int(meta["start_char"]),
                "end_char": int(meta["end_char"]),
                "text": node.text,
                "embed_text": embed_text,
                "text_sha": text_sha256(embed_text),
                "metadata": json.dumps({k: v for k, v in meta.items() if k not in _OWN_COLUMNS}, default=str),
            }
        )
    columns = ["chunk_id", "doc_id", "chunk_index", "start_char", "end_char", "text", "embed_text", "text_sha",
               "metadata"]
    return pd.DataFrame(rows, columns=columns)


def load_or_build_chunkset(path: Path, corpus: Corpus, make_chunker: Callable[[], Any],
                           lock: AbstractContextManager[Any] = _NO_LOCK,
                           before_publish: Callable[[], None] | None = None) -> tuple[pd.DataFrame, bool]:
    """The chunk set and whether it was built now (False when read from the cache).

    A missing chunk set is built under ``lock`` (its content lock): a process that waited finds
    it written and reads it. ``before_publish`` runs after chunking, before the file exists.
    The chunker is made only on a cache miss: some (semantic) load a model."""
    if path.exists():
        return pd.read_parquet(path), False
    with lock:
        if path.exists():
            return pd.read_parquet(path), False
        frame = chunk_corpus(corpus, make_chunker())
        if before_publish is not None:
            before_publish()
        write_parquet_atomic(path, frame)
        return frame, True


def build_chunkset_streamed(path: Path, corpus: Corpus, make_chunker: Callable[[], Any], window_rows: int,
                            lock: AbstractContextManager[Any] = _NO_LOCK,
                            before_publish: Callable[[], None] | None = None) -> bool:
    """``load_or_build_chunkset`` without the frame: the corpus is chunked ``STREAM_DOCUMENTS`` at
    a time and written in row groups of ``window_rows``, so memory holds one window, not the
    chunk set. True when built now, False when the file was there."""
    if path.exists():
        return False
    with lock:
        if path.exists():
            return False
        chunker = make_chunker()
        frames = (chunk_frame(chunker.chunk(list(batch))) for batch in corpus.batches(STREAM_DOCUMENTS))
        write_atomic(path, lambda tmp: write_chunk_frames(tmp, frames, window_rows, before_publish))
        return True


def write_chunk_frames(path: Path, frames: Iterable[pd.DataFrame], rows_per_group: int,
                       before_close: Callable[[], None] | None = None) -> None:
    """The frames as one Parquet file of ``rows_per_group``-row groups. A chunk set of at most that
    many rows is the same bytes as ``write_parquet_atomic`` of the whole frame: one row group, each
    column one contiguous array (the pages a column is cut into depend on its Arrow chunks)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer: Any = None
    pending: list[Any] = []
    held = 0
    try:
        for frame in frames:
            if frame.empty:
                continue
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="snappy")
            pending.append(table)
            held += table.num_rows
            while held >= rows_per_group:
                rows = pa.concat_tables(pending)
                writer.write_table(rows.slice(0, rows_per_group).combine_chunks(), row_group_size=rows_per_group)
                pending, held = [rows.slice(rows_per_group)], held - rows_per_group
        if writer is None:  # no chunk at all: the empty frame, as the whole-frame build writes it
            chunk_frame([]).to_parquet(path, index=False)
        elif held:
            writer.write_table(pa.concat_tables(pending).combine_chunks(), row_group_size=rows_per_group)
        if before_close is not None:
            before_close()
    finally:
        if writer is not None:
            writer.close()


def load_or_build_judged_chunkset(path: Path, decisions_file: Path, corpus: Corpus,
                                  build: Callable[[], tuple[pd.DataFrame, list[dict[str, Any]]]],
                                  lock: AbstractContextManager[Any] = _NO_LOCK,
                                  before_publish: Callable[[], None] | None = None,
                                  ) -> tuple[pd.DataFrame, list[dict[str, Any]], bool]:
    """Like load_or_build_chunkset, with the judge's decisions; they are written first, so an
    existing chunk set always has its decisions beside it."""
    def read() -> tuple[pd.DataFrame, list[dict[str, Any]], bool]:
        return pd.read_parquet(path), json.loads(decisions_file.read_text(encoding="utf-8")), False

    if path.exists() and decisions_file.exists():
        return read()
    with lock:
        if path.exists() and decisions_file.exists():
            return read()
        frame, decisions = build()
        if before_publish is not None:
            before_publish()
        write_json_atomic(decisions_file, decisions)
        write_parquet_atomic(path, frame)
        return frame, decisions, True


def build_judged_chunkset_streamed(path: Path, decisions_file: Path, corpus: Corpus,
                                   decide: Callable[[Any], tuple[Any, Any]], build_chunker: Callable[[Any], Any],
                                   window_rows: int, lock: AbstractContextManager[Any] = _NO_LOCK,
                                   before_publish: Callable[[], None] | None = None,
                                   ) -> tuple[list[dict[str, Any]], bool]:
    """``load_or_build_judged_chunkset`` without the frame, as ``build_chunkset_streamed``: the
    judge's decisions and whether the chunk set was built now. The decisions are written before
    the chunk set file is published, so an existing chunk set always has its decisions beside it."""
    def read_decisions() -> list[dict[str, Any]]:
        decisions: list[dict[str, Any]] = json.loads(decisions_file.read_text(encoding="utf-8"))
        return decisions

    if path.exists() and decisions_file.exists():
        return read_decisions(), False
    with lock:
        if path.exists() and decisions_file.exists():
            return read_decisions(), False
        decisions: list[dict[str, Any]] = []
        frames = judged_frames(corpus, decide, build_chunker, decisions)

        def before_close() -> None:  # every frame written: the decisions are complete
            if before_publish is not None:
                before_publish()
            write_json_atomic(decisions_file, decisions)

        write_atomic(path, lambda tmp: write_chunk_frames(tmp, frames, window_rows, before_close))
        return decisions, True
