"""Per-search cost of the retrieval cache: the old file per search against the SQLite table.

    python benchmarks/bench_retrieval_cache.py              # 2,000 searches, 10 hits each
    python benchmarks/bench_retrieval_cache.py --searches 5000 --per-flush 20

Both layouts store the same entries (10 hits of about 1 kB of text each, like a top_k=10 search)
in a fresh temporary folder, flushed ``--per-flush`` searches at a time as the executor flushes
after each question (one question's searches across the grid's retrievers). The old layout is
reproduced here with ``write_cache_entry`` (what ``RetrievalCache.flush`` called before) and read
back with ``json.loads`` of each file; the table is ``RetrievalCache`` itself. Printed: one
markdown row per layout: write and read milliseconds per search, and bytes on disk.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ragkit.artefacts.index import CHUNK_COLUMNS, Hit
from ragkit.retrievers.cache import RetrievalCache
from ragkit.storage.atomic import write_cache_entry

# One search's hits, built once: only the cache's own work (to JSON, to disk, back) is timed.
HITS = [Hit({c: (f"chunk {i} " * 60 if c in ("text", "embed_text") else f"{c}-{i}") for c in CHUNK_COLUMNS},
            1.0 / (i + 1)) for i in range(10)]


class _FileCache(RetrievalCache):
    """The old read path: the entry's own file only (the same parsing into hits as the table's)."""

    def _stored(self, key: str) -> dict | None:
        return json.loads(self._legacy_path(key).read_text(encoding="utf-8"))


def _disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def bench_files(root: Path, keys: list[str], per_flush: int) -> tuple[float, float, int]:
    template = RetrievalCache(root / "unused")
    start = time.perf_counter()
    for first in range(0, len(keys), per_flush):
        for key in keys[first:first + per_flush]:
            template.put(key, HITS, 0.01)
            entry = template._pending.pop(key)
            write_cache_entry(root / key[:2] / f"{key}.json", entry)
    write = time.perf_counter() - start
    reader = _FileCache(root)
    start = time.perf_counter()
    for key in keys:
        assert reader.get(key) is not None
    return write, time.perf_counter() - start, _disk(root)


def bench_table(root: Path, keys: list[str], per_flush: int) -> tuple[float, float, int]:
    cache = RetrievalCache(root)
    start = time.perf_counter()
    for first in range(0, len(keys), per_flush):
        for key in keys[first:first + per_flush]:
            cache.put(key, HITS, 0.01)
        cache.flush()
    write = time.perf_counter() - start
    reader = RetrievalCache(root)
    start = time.perf_counter()
    for key in keys:
        assert reader.get(key) is not None
    read = time.perf_counter() - start
    cache.close()
    reader.close()
    return write, read, _disk(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=2000)
    parser.add_argument("--per-flush", type=int, default=12, help="searches per flush (one question's)")
    args = parser.parse_args()
    keys = [RetrievalCache.key("index", "bm25", {"n": n}, f"query {n}", None) for n in range(args.searches)]
    print("| layout | write ms/search | read ms/search | MB on disk |")
    print("|---|---|---|---|")
    for name, bench in (("file per search (before)", bench_files), ("SQLite table (after)", bench_table)):
        with tempfile.TemporaryDirectory() as folder:
            write, read, size = bench(Path(folder), keys, args.per_flush)
        n = len(keys)
        print(f"| {name} | {write / n * 1e3:.3f} | {read / n * 1e3:.3f} | {size / 1e6:.1f} |")


if __name__ == "__main__":
    main()
