"""A streamed build's windows hold one window's Arrow memory, not the chunk set read so far: one
pyarrow reader over the whole file kept decoded memory of every row group it had read."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from ragkit.index_stream import chunkset_windows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from probe_dense_build import write_chunkset  # noqa: E402  # the probe's synthetic chunk set

pytestmark = pytest.mark.unit


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
