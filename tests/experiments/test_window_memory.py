"""A streamed build's windows hold one window's Arrow memory, not the chunk set read so far: one
pyarrow reader over the whole file kept decoded memory of every row group it had read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from ragkit.artefacts.chunksets import write_chunk_frames
from ragkit.artefacts.index_stream import chunkset_windows
from ragkit.hashing import text_sha256

pytestmark = pytest.mark.unit


def write_chunkset(path: Path, rows: int, group_rows: int) -> None:
    """Short distinct chunks in row groups of ``group_rows``, as a streamed chunk set is written."""
    def frames() -> Iterator[pd.DataFrame]:
        for start in range(0, rows, 10_000):
            texts = [f"chunk {i} " + "cell protein gene virus " * 7 for i in range(start, start + 10_000)]
            yield pd.DataFrame({
                "chunk_id": [f"c{i}" for i in range(start, start + 10_000)], "doc_id": "d", "chunk_index": 0,
                "start_char": 0, "end_char": 1, "text": texts, "embed_text": texts,
                "text_sha": [text_sha256(t) for t in texts], "metadata": "{}",
            })

    write_chunk_frames(path, frames(), group_rows)


def test_reading_windows_holds_about_one_window(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "chunks.parquet"
    write_chunkset(path, 160_000, 8_192)  # 20 row groups of short distinct chunks
    window_bytes = pq.ParquetFile(path).read_row_group(0).nbytes
    held = []
    for frame in chunkset_windows(path, 8_192):
        del frame
        held.append(pa.total_allocated_bytes())
    assert len(held) == 20
    # Measured (pyarrow 26): a reader per row group holds 2.9x a window's table between windows
    # (its decoding buffers); one reader over the whole file held 7.2x here, and at 65,536-row
    # windows grew by 33 MB every ~5 groups (73 -> 126 MB over 12).
    assert max(held) < 4 * window_bytes, ([round(h / 1e6, 1) for h in held], round(window_bytes / 1e6, 1))
