"""Chunk sets: a corpus cut by one chunker, stored once as Parquet under its content key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ragkit.atomic import write_parquet_atomic
from ragkit.corpus.model import Corpus
from ragkit.hashing import text_sha256

# Node metadata that has its own column (or is recomputed) rather than living in `metadata`.
_OWN_COLUMNS = ("doc_id", "start_char", "end_char", "chunk_index", "embed_text")


def chunkset_path(derived_dir: Path, chunkset_id: str) -> Path:
    return derived_dir / "chunksets" / f"{chunkset_id}.parquet"


def chunk_corpus(corpus: Corpus, chunker: Any) -> pd.DataFrame:
    """One row per chunk with exact offsets into its document and the text to embed."""
    nodes = chunker.chunk(list(corpus.documents))
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
    columns = ["chunk_id", "doc_id", "chunk_index", "start_char", "end_char", "text", "embed_text", "text_sha", "metadata"]
    return pd.DataFrame(rows, columns=columns)


def load_or_build_chunkset(path: Path, corpus: Corpus, make_chunker: Callable[[], Any]) -> tuple[pd.DataFrame, bool]:
    """The chunk set and whether it was built now (False when read from the cache).

    The chunker is made only on a cache miss: some (semantic) load a model."""
    if path.exists():
        return pd.read_parquet(path), False
    frame = chunk_corpus(corpus, make_chunker())
    write_parquet_atomic(path, frame)
    return frame, True
