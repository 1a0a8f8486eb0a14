"""An index's rows streamed from its chunk set's file: windows of chunks read from the Parquet
file, each embedded through the embedding cache, handed to LanceDB as record batches.

Memory holds one window (its chunks and their vectors), not the chunk set: a 1M-chunk build held
the chunk set as a frame and every vector at once (``benchmarks/README.md``, scale section). The
rows are the ones ``IndexStore.build`` writes from the whole frame, in the same order and
batches of ``WRITE_BATCH_ROWS`` (windows are a multiple of it by default), so the table is the
same. What can differ is the vectors of a real model: the cache embeds a window's missing texts
shortest first, in batches of ``embed_batch_size``, and a chunk set larger than one window is
cut into other batches than the whole-frame build's (a model's padding can move the last bits).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.artefacts.index import index_row_batches
from ragkit.embedders.base import Embedder
from ragkit.embedders.cache import EmbeddingCache, embed_with_cache


def _glibc() -> Any:
    """glibc, if this process runs on it (``malloc_trim`` is glibc's); None elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _glibc()


def release_freed_memory() -> None:
    """Hand the memory a window freed back to the OS. glibc keeps freed blocks in the arena of
    the thread that allocated them, and LanceDB's reading and writing threads use several
    arenas: without this, a 200k-chunk streamed build grew about 450 MB a window (65,536 rows)
    with under 160 MB live in Arrow, instead of reusing it."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


@dataclass
class EmbeddingTally:
    """What a streamed build's embedding did, filled in as its windows pass: the texts embedded
    now (not found in the cache) and the seconds spent on lookup, model and cache commits."""

    embedded: int = 0
    seconds: float = 0.0


def chunkset_windows(path: Path, window_rows: int) -> Iterator[pd.DataFrame]:
    """The chunk set's rows ``[k * window_rows, (k + 1) * window_rows)`` as frames, whatever row
    groups the file was written in (a chunk set built whole is one group of every row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pending: list[Any] = []
    held = 0
    # A reader per row group: one reader over the whole file kept decoded memory of the groups it
    # had read (pyarrow 26: +33 MB of live Arrow memory every ~5 groups of 65,536 short chunks,
    # 73 -> 126 MB over 12 groups, freed only at the end), so a dense build grew with the chunk set.
    parquet = pq.ParquetFile(path)
    batches = (batch for group in range(parquet.num_row_groups)
               for batch in parquet.iter_batches(batch_size=window_rows, row_groups=[group]))
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        while held >= window_rows:
            rows = pa.Table.from_batches(pending)
            yield rows.slice(0, window_rows).to_pandas()
            pending, held = rows.slice(window_rows).to_batches(), held - window_rows
    if held:
        yield pa.Table.from_batches(pending).to_pandas()


def embedded_windows(windows: Iterable[pd.DataFrame], embedder: Embedder, cache: EmbeddingCache, batch_size: int,
                     lock: AbstractContextManager[Any], tally: EmbeddingTally,
                     progress: Callable[[int], None] | None = None,
                     ) -> Generator[tuple[pd.DataFrame, np.ndarray | None], None, None]:
    """Each window with its vectors, through the cache. The embedder's content lock is held from
    the first window to the cache's compaction after the last, as the whole-frame build holds it
    around its one ``embed_with_cache``; a window's new vectors are committed before the next
    window looks its keys up, so a text repeated across windows is embedded once."""
    with lock:
        for frame in windows:
            started = time.perf_counter()
            vectors, embedded = embed_with_cache(embedder, frame["embed_text"].tolist(), frame["text_sha"].tolist(),
                                                 cache, batch_size, progress, compact=False)
            tally.embedded += embedded
            tally.seconds += time.perf_counter() - started
            yield frame, vectors
            del frame, vectors
            release_freed_memory()
        if tally.embedded:
            started = time.perf_counter()
            cache.compact()
            tally.seconds += time.perf_counter() - started


def index_batch_reader(windows: Iterable[tuple[pd.DataFrame, np.ndarray | None]]) -> Any:
    """The windows' index rows as one ``pyarrow.RecordBatchReader`` for
    ``IndexStore.build_from_batches``; the first window is read here for the schema, so there
    must be one (an empty chunk set is built whole)."""
    import pyarrow as pa

    def batches_of(windows: Iterable[tuple[pd.DataFrame, np.ndarray | None]]) -> Iterator[Any]:
        for frame, vectors in windows:
            yield from index_row_batches(frame, vectors)
            del frame, vectors
            release_freed_memory()

    batches = batches_of(windows)
    first = next(batches)
    return pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
