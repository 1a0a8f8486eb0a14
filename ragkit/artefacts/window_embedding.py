"""One window of a chunk set embedded on its own, so the windows of one index can be embedded in
parallel (the Ray executor's ``embed`` steps) before the index step that reads them all.

A window embeds exactly what the in-process streamed build (``index_stream.embedded_windows``)
embeds for it: that build walks the windows in order and commits each before the next looks its
keys up, so window ``k`` embeds the texts first seen in it (not in an earlier window of the
chunk set) that the cache lacks, shortest first, in batches of ``embed_batch_size``. Here the
texts of earlier windows are read from the file (their key column only) instead of waited for,
so the same batches, and with the same threads the same vectors, come out of every window at
once. A text first seen in window ``k`` is embedded by window ``k`` only; what a later window
committed already can only be texts this window skips.

The model runs without the embedder's content lock (held, the windows would run one after the
other); the lock is taken only to append, and under it the keys are looked up again and only
those still missing are appended. So a text is stored once even if another writer (another
process, an index of another chunk set) embedded it meanwhile, and ``embedded`` counts the
vectors this window added: summed over the windows, what the in-process build reports. Each
append is one cache commit (``EmbeddingCache.add``), every ``COMMIT_ROWS`` vectors or
``COMMIT_SECONDS``: a worker killed mid-window loses at most its uncommitted vectors, and the
window run again embeds only what the cache still lacks.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.embedders.base import Embedder
from ragkit.embedders.cache import EmbeddingCache, embed_pending, missing_texts


def window_count(path: Path, window_rows: int) -> int:
    """How many windows of ``window_rows`` a streamed build cuts the chunk set file into."""
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(path).metadata.num_rows
    return -(-rows // window_rows) if window_rows else 1


def chunkset_window(path: Path, window_rows: int, number: int, columns: list[str] | None = None) -> pd.DataFrame:
    """Rows ``[number * window_rows, (number + 1) * window_rows)`` of the chunk set file: the
    frame ``index_stream.chunkset_windows`` yields as its window ``number``, reading only the row
    groups that hold it."""
    start = number * window_rows
    return _rows(path, start, start + window_rows, columns).to_pandas()


def keys_before(path: Path, rows: int, wanted: set[str]) -> set[str]:
    """The keys of ``wanted`` found in the chunk set's first ``rows`` rows, one row group's key
    column at a time (memory holds ``wanted``, not the keys of every earlier window)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if rows <= 0 or not wanted:
        return set()
    file = pq.ParquetFile(path)
    value_set = pa.array(sorted(wanted), type=pa.string())
    found: set[str] = set()
    offset = 0
    for group in range(file.num_row_groups):
        if offset >= rows:
            break
        keys = file.read_row_group(group, columns=["text_sha"]).column("text_sha")
        keys = keys.slice(0, rows - offset)
        offset += file.metadata.row_group(group).num_rows
        found.update(keys.filter(pc.is_in(keys, value_set=value_set)).to_pylist())
    return found


def embed_window(embedder: Embedder, path: Path, window_rows: int, number: int, cache: EmbeddingCache,
                 batch_size: int, lock: AbstractContextManager[Any]) -> tuple[int, float]:
    """Embed window ``number`` of the chunk set into the cache (see the module docstring); the
    vectors this call added and the seconds it took."""
    started = time.perf_counter()
    frame = chunkset_window(path, window_rows, number, ["text_sha", "embed_text"])
    keys, texts = frame["text_sha"].tolist(), frame["embed_text"].tolist()
    earlier = keys_before(path, number * window_rows, set(keys))
    pending = missing_texts(texts, keys, cache.lookup(keys), skip=earlier)
    added = 0

    def append_missing(batch_keys: list[str], vectors: np.ndarray) -> None:
        nonlocal added
        with lock:
            present = cache.lookup(batch_keys)
            fresh = [row for row, key in enumerate(batch_keys) if key not in present]
            if fresh:
                cache.add([batch_keys[row] for row in fresh], vectors[fresh])
                added += len(fresh)

    embed_pending(embedder, pending, batch_size, append_missing, cache)
    return added, time.perf_counter() - started


def _rows(path: Path, start: int, end: int, columns: list[str] | None) -> Any:
    """Rows ``[start, end)`` of a Parquet file as an Arrow table, from the row groups holding them."""
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    groups: list[int] = []
    first = offset = 0
    for group in range(file.num_row_groups):
        size = file.metadata.row_group(group).num_rows
        if offset < end and offset + size > start:
            if not groups:
                first = offset
            groups.append(group)
        offset += size
    table = file.read_row_groups(groups, columns=columns)
    return table.slice(start - first, min(end, offset) - start)
