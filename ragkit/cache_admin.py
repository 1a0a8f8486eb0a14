"""What the caches under a data directory hold, and pruning old entries (``ragkit cache``).

Three caches grow with every new configuration and question and are never needed for
correctness, only for speed (a pruned entry is simply recomputed the next time it is asked for):

- ``llm_cache/``: one JSON file per LLM reply; its age is the file's modification time.
- ``retrieval_cache/``: one SQLite table (``retrievals.sqlite``, a ``written`` time per row),
  plus per-search JSON files left by versions before the table.
- ``embeddings/``: one LanceDB table per embedder (``embeddings_<key>.lance``). Reported here,
  not pruned: vectors have no per-row time, and a table is read by runs without a lock, so
  removing it under a running process is not safe.

Pruning is safe beside a running experiment: an LLM file is written by an atomic rename, so it
is either whole or absent and unlinking it never leaves half of one; retrieval rows are deleted
in one SQLite transaction, which waits for (and never interleaves with) a writer's transaction.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from ragkit.errors import ConfigError
from ragkit.retrievers.cache import TABLE_FILE
from ragkit.retrievers.cache import connect as connect_retrievals

LLM_DIR = "llm_cache"
RETRIEVAL_DIR = "retrieval_cache"
EMBEDDINGS_DIR = "embeddings"
PRUNABLE = ("llm", "retrieval")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


class CacheSize(BaseModel):
    cache: str = Field(description="llm, retrieval or embeddings")
    entries: int = Field(ge=0, description="cached replies, searches or vectors")
    bytes: int = Field(ge=0, description="bytes on disk")
    oldest: float | None = Field(default=None, description="Unix time of the oldest entry (None: empty)")
    newest: float | None = Field(default=None, description="Unix time of the newest entry (None: empty)")


class PruneResult(BaseModel):
    cache: str
    removed: int = Field(ge=0, description="entries removed (or that would be, in a dry run)")
    kept: int = Field(ge=0, description="entries left")


def parse_duration(text: str) -> float:
    """Seconds of a duration such as ``30d``, ``12h``, ``90m``, ``2w`` or ``45s``."""
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"--older-than {text!r} is not a duration. Valid: a number and a unit "
                          f"({', '.join(_UNITS)}), e.g. 30d, 12h, 90m")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _llm_files(data_dir: Path) -> Iterator[Path]:
    root = data_dir / LLM_DIR
    return root.glob("??/*.json") if root.is_dir() else iter(())


def _legacy_retrieval_files(data_dir: Path) -> Iterator[Path]:
    root = data_dir / RETRIEVAL_DIR
    return root.glob("??/*.json") if root.is_dir() else iter(())


def _file_entries(files: Iterator[Path]) -> list[tuple[Path, float, int]]:
    found = []
    for path in files:
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue  # pruned or replaced by another process meanwhile
        found.append((path, stat.st_mtime, stat.st_size))
    return found


def _files_size(cache: str, entries: list[tuple[Path, float, int]]) -> CacheSize:
    times = [mtime for _, mtime, _ in entries]
    return CacheSize(cache=cache, entries=len(entries), bytes=sum(size for *_, size in entries),
                     oldest=min(times, default=None), newest=max(times, default=None))


def _retrieval_size(data_dir: Path) -> CacheSize:
    legacy = _files_size("retrieval", _file_entries(_legacy_retrieval_files(data_dir)))
    table = data_dir / RETRIEVAL_DIR / TABLE_FILE
    if not table.exists():
        return legacy
    db = connect_retrievals(data_dir / RETRIEVAL_DIR)
    try:
        rows, oldest, newest = db.execute("SELECT COUNT(*), MIN(written), MAX(written) FROM retrievals").fetchone()
    finally:
        db.close()
    on_disk = sum(p.stat().st_size for p in table.parent.glob(f"{TABLE_FILE}*") if p.is_file())
    return CacheSize(cache="retrieval", entries=rows + legacy.entries, bytes=on_disk + legacy.bytes,
                     oldest=min((t for t in (oldest, legacy.oldest) if t is not None), default=None),
                     newest=max((t for t in (newest, legacy.newest) if t is not None), default=None))


def _embeddings_size(data_dir: Path) -> CacheSize:
    root = data_dir / EMBEDDINGS_DIR
    tables = sorted(root.glob("embeddings_*.lance")) if root.is_dir() else []
    if not tables:
        return CacheSize(cache="embeddings", entries=0, bytes=0)
    import lancedb

    db = lancedb.connect(root)
    rows = sum(db.open_table(table.name.removesuffix(".lance")).count_rows() for table in tables)
    files = [p.stat() for table in tables for p in table.rglob("*") if p.is_file()]
    return CacheSize(cache="embeddings", entries=rows, bytes=sum(s.st_size for s in files),
                     oldest=min((s.st_mtime for s in files), default=None),
                     newest=max((s.st_mtime for s in files), default=None))


def cache_sizes(data_dir: Path) -> list[CacheSize]:
    """Entries, bytes and the oldest/newest write of each cache under ``data_dir``."""
    data_dir = Path(data_dir)
    return [_files_size("llm", _file_entries(_llm_files(data_dir))), _retrieval_size(data_dir),
            _embeddings_size(data_dir)]


def prune_caches(data_dir: Path, older_than: float, *, dry_run: bool = False,
                 clock: Callable[[], float] = time.time) -> list[PruneResult]:
    """Remove LLM and retrieval entries written more than ``older_than`` seconds ago."""
    data_dir = Path(data_dir)
    cutoff = clock() - older_than
    llm_removed, llm_kept = _prune_files(_file_entries(_llm_files(data_dir)), cutoff, dry_run)
    legacy_removed, legacy_kept = _prune_files(_file_entries(_legacy_retrieval_files(data_dir)), cutoff, dry_run)
    rows_removed, rows_kept = _prune_retrieval_rows(data_dir, cutoff, dry_run)
    return [PruneResult(cache="llm", removed=llm_removed, kept=llm_kept),
            PruneResult(cache="retrieval", removed=legacy_removed + rows_removed, kept=legacy_kept + rows_kept)]


def _prune_files(entries: list[tuple[Path, float, int]], cutoff: float, dry_run: bool) -> tuple[int, int]:
    old = [path for path, mtime, _ in entries if mtime < cutoff]
    if not dry_run:
        for path in old:
            path.unlink(missing_ok=True)  # a whole file (written by rename): never half of one
    return len(old), len(entries) - len(old)


def _prune_retrieval_rows(data_dir: Path, cutoff: float, dry_run: bool) -> tuple[int, int]:
    if not (data_dir / RETRIEVAL_DIR / TABLE_FILE).exists():
        return 0, 0
    db = connect_retrievals(data_dir / RETRIEVAL_DIR)
    try:
        if dry_run:
            old = db.execute("SELECT COUNT(*) FROM retrievals WHERE written < ?", (cutoff,)).fetchone()[0]
        else:
            try:
                old = db.execute("DELETE FROM retrievals WHERE written < ?", (cutoff,)).rowcount
            except sqlite3.OperationalError as error:  # a writer held the table past the busy timeout
                raise ConfigError(f"the retrieval cache is busy ({error}); run the prune again") from error
        total = db.execute("SELECT COUNT(*) FROM retrievals").fetchone()[0]
    finally:
        db.close()
    return old, total if not dry_run else total - old
