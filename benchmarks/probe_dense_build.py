"""Where a streamed dense index build's memory goes, window by window (issue 32 #2, item b).

    python benchmarks/probe_dense_build.py [--rows 400000] [--window-rows 65536] [--part all|embed|index]
                                           [--cache-connection shared|fresh]

Builds a synthetic chunk set of ``--rows`` short chunks (distinct texts), then runs the executor's
streamed dense build on it (``index_stream``: windows read from the file, embedded through the
embedding cache by a stand-in that returns each text's hash-seeded vector, written to LanceDB as
one ``create_table``) in this process, and prints after each window: RSS, the bytes pyarrow's
pool holds, and the embedding cache's LanceDB versions. ``--part embed`` leaves out the index
write (the windows are embedded and dropped), ``--part index`` the cache (vectors made directly).
``--cache-connection fresh`` opens the cache table through a new LanceDB connection at every
lookup and commit instead of the cache's one connection (whose session keeps what it read).
tracemalloc/memray are not used: most of the memory is native (LanceDB, Arrow). A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from bench_scale import hashed_vectors  # the scale benchmark's stand-in vectors, so the probe builds what it builds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def write_chunkset(path: Path, rows: int, window_rows: int) -> None:
    import pandas as pd

    from ragkit.artefacts.chunksets import write_chunk_frames
    from ragkit.hashing import text_sha256

    def frames() -> Iterator[pd.DataFrame]:
        for start in range(0, rows, 10_000):
            texts = [f"chunk {i} " + "cell protein gene virus trial dose risk " * 4
                     for i in range(start, min(rows, start + 10_000))]
            yield pd.DataFrame({
                "chunk_id": [f"c{i}" for i in range(start, start + len(texts))],
                "doc_id": [f"d{i}" for i in range(start, start + len(texts))],
                "chunk_index": 0, "start_char": 0, "end_char": [len(t) for t in texts],
                "text": texts, "embed_text": texts, "text_sha": [text_sha256(t) for t in texts], "metadata": "{}",
            })

    write_chunk_frames(path, frames(), window_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--window-rows", type=int, default=65_536)
    parser.add_argument("--part", choices=("all", "embed", "index"), default="all")
    parser.add_argument("--cache-connection", choices=("shared", "fresh"), default="shared")
    parser.add_argument("--copy-batches", action="store_true",
                        help="hand LanceDB each batch's columns copied into buffers of their own")
    args = parser.parse_args()

    import pyarrow as pa

    from ragkit.artefacts.index import IndexStore
    from ragkit.artefacts.index_stream import EmbeddingTally, chunkset_windows, embedded_windows, index_batch_reader
    from ragkit.embedders.cache import EmbeddingCache

    class HashedEmbedder:
        def embed_texts(self, texts: list[str]) -> np.ndarray:
            return hashed_vectors(texts)

    if args.copy_batches:
        import ragkit.artefacts.index_stream as index_stream
        from ragkit.artefacts.index import index_row_batches

        def copied(chunks: Any, vectors: Any) -> list[Any]:
            return [pa.RecordBatch.from_arrays([pa.concat_arrays([column]) for column in batch.columns],
                                               schema=batch.schema) for batch in index_row_batches(chunks, vectors)]

        index_stream.index_row_batches = copied  # type: ignore[assignment]

    if args.cache_connection == "fresh":
        import lancedb

        def fresh_table(self: EmbeddingCache) -> Any:
            try:
                return lancedb.connect(self._db_dir).open_table(self._table_name)
            except ValueError:
                return None

        EmbeddingCache._table = fresh_table  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        path = scratch / "chunks.parquet"
        write_chunkset(path, args.rows, args.window_rows)
        cache = EmbeddingCache(scratch / "embeddings", "probe")
        print(f"load {os.getloadavg()[0]:.1f}; chunk set written; RSS {rss_mb():.0f} MB", flush=True)
        started, cpu_started = time.perf_counter(), os.times()
        tally = EmbeddingTally()
        windows: Any
        if args.part == "index":
            windows = ((frame, hashed_vectors(frame["embed_text"].tolist()))
                       for frame in chunkset_windows(path, args.window_rows))
        else:
            from contextlib import nullcontext

            windows = embedded_windows(chunkset_windows(path, args.window_rows), HashedEmbedder(),  # type: ignore[arg-type]
                                       cache, 256, nullcontext(), tally)
        samples: list[dict[str, float]] = []
        sampler = PeakSampler()

        def sampled(windows: Any) -> Iterator[Any]:
            for number, item in enumerate(windows):
                yield item
                table = cache._table()
                samples.append({"window": number, "peak_rss_mb": round(sampler.take_peak()), "arrow_mb": round(
                    pa.total_allocated_bytes() / 1e6), "cache_versions": len(table.list_versions()) if table else 0})
                print(json.dumps(samples[-1]), flush=True)

        if args.part == "embed":
            for _ in sampled(windows):
                pass
        else:
            IndexStore(scratch / "lancedb").build_from_batches("probe", index_batch_reader(sampled(windows)),
                                                               fulltext=False)
        print(json.dumps({"after the last window (the cache's compaction, the write's end)": round(
            sampler.take_peak())}), flush=True)
        cpu = os.times()
        print(f"load {os.getloadavg()[0]:.1f}; {time.perf_counter() - started:.0f} s, "
              f"{cpu.user + cpu.system - cpu_started.user - cpu_started.system:.0f} CPU s; "
              f"RSS at end {rss_mb():.0f} MB; peak {_peak_mb():.0f} MB")
        sampler.stop()
        # The last window is short and followed by the cache's compaction: the slope is over the full ones.
        full = samples[:-1] if len(samples) > 2 else samples
        slope = np.polyfit([s["window"] for s in full], [s["peak_rss_mb"] for s in full], 1)[0] if len(full) > 1 else 0
        print(f"peak RSS per window: slope {slope:.1f} MB a window over the {len(full)} full windows")


class PeakSampler:
    """The highest RSS seen (every 20 ms, in a thread) since the last ``take_peak``."""

    def __init__(self) -> None:
        import threading

        self._peak = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.02):
            self._peak = max(self._peak, rss_mb())

    def take_peak(self) -> float:
        peak, self._peak = max(self._peak, rss_mb()), 0.0
        return peak

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
