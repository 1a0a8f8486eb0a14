"""What the caches under a data directory hold, and pruning old entries (``ragkit cache``).

Three caches grow with every new configuration and question and are never needed for
correctness, only for speed (a pruned entry is simply recomputed the next time it is asked for):

- ``llm_cache/``: one JSON file per LLM reply; its age is the file's modification time.
- ``retrieval_cache/``: one SQLite table (``retrievals.sqlite``, a ``written`` time per row),
  plus per-search JSON files left by versions before the table.
- ``embeddings/``: one LanceDB table per embedder (``embeddings_<key>.lance``). Vectors have no
  per-row time, so a row's age is its table's last write (a row is never younger than that:
  pruning by it keeps more, never less).

``--keep-runs DIR...`` protects, whatever their age, the entries the runs of those results folders
recorded (``ragkit.caches.keys``: the folder's ``cache_keys/``); a folder with runs committed before
records existed is an error naming it, never a silent prune.

Pruning is safe beside a running experiment: an LLM file is written by an atomic rename, so it
is either whole or absent and unlinking it never leaves half of one; retrieval rows are deleted
in one SQLite transaction, which waits for (and never interleaves with) a writer's transaction.
Embedding rows are deleted holding the embedder's lock (``ragkit.storage.locks``), which a run holds
while it looks up, embeds and appends vectors: a prune refuses at once, naming the run, while one
is embedding with that embedder. A delete is a new LanceDB version, so a process reading the
table without the lock (``ragkit run --dry-run``'s estimate) still reads the version it opened.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from ragkit.caches.keys import LLM, RECORD_DIR, RECORD_FORMAT, RETRIEVAL, embeddings_cache
from ragkit.errors import ConfigError
from ragkit.retrievers.cache import TABLE_FILE
from ragkit.retrievers.cache import connect as connect_retrievals
from ragkit.storage.locks import content_lock

LLM_DIR = "llm_cache"
RETRIEVAL_DIR = "retrieval_cache"
EMBEDDINGS_DIR = "embeddings"
PRUNABLE = ("llm", "retrieval", "embeddings")
# Keys per LanceDB delete filter (a few thousand keys make a filter of about 150 kB).
DELETE_BATCH = 2_000

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
                 keep: dict[str, set[str]] | None = None,
                 clock: Callable[[], float] = time.time) -> list[PruneResult]:
    """Remove LLM, retrieval and embedding entries written more than ``older_than`` seconds ago,
    except the keys in ``keep`` (per cache, as ``keep_set`` reads them from results folders)."""
    data_dir = Path(data_dir)
    keep = keep or {}
    cutoff = clock() - older_than
    llm_removed, llm_kept = _prune_files(_file_entries(_llm_files(data_dir)), cutoff, keep.get(LLM, set()), dry_run)
    legacy_removed, legacy_kept = _prune_files(_file_entries(_legacy_retrieval_files(data_dir)), cutoff,
                                               keep.get(RETRIEVAL, set()), dry_run)
    rows_removed, rows_kept = _prune_retrieval_rows(data_dir, cutoff, keep.get(RETRIEVAL, set()), dry_run)
    vectors_removed, vectors_kept = _prune_embeddings(data_dir, cutoff, keep, dry_run)
    return [PruneResult(cache="llm", removed=llm_removed, kept=llm_kept),
            PruneResult(cache="retrieval", removed=legacy_removed + rows_removed, kept=legacy_kept + rows_kept),
            PruneResult(cache="embeddings", removed=vectors_removed, kept=vectors_kept)]


def _prune_files(entries: list[tuple[Path, float, int]], cutoff: float, keep: set[str],
                 dry_run: bool) -> tuple[int, int]:
    old = [path for path, mtime, _ in entries if mtime < cutoff and path.stem not in keep]
    if not dry_run:
        for path in old:
            path.unlink(missing_ok=True)  # a whole file (written by rename): never half of one
    return len(old), len(entries) - len(old)


def _prune_retrieval_rows(data_dir: Path, cutoff: float, keep: set[str], dry_run: bool) -> tuple[int, int]:
    if not (data_dir / RETRIEVAL_DIR / TABLE_FILE).exists():
        return 0, 0
    db = connect_retrievals(data_dir / RETRIEVAL_DIR)
    old_rows = "FROM retrievals WHERE written < ? AND key NOT IN (SELECT key FROM temp.kept)"
    try:
        db.execute("CREATE TEMP TABLE kept (key TEXT PRIMARY KEY)")
        db.executemany("INSERT INTO temp.kept (key) VALUES (?)", ((key,) for key in keep))
        if dry_run:
            old = db.execute(f"SELECT COUNT(*) {old_rows}", (cutoff,)).fetchone()[0]
        else:
            try:
                old = db.execute(f"DELETE {old_rows}", (cutoff,)).rowcount
            except sqlite3.OperationalError as error:  # a writer held the table past the busy timeout
                raise ConfigError(f"the retrieval cache is busy ({error}); run the prune again") from error
        total = db.execute("SELECT COUNT(*) FROM retrievals").fetchone()[0]
    finally:
        db.close()
    return old, total if not dry_run else total - old


def _prune_embeddings(data_dir: Path, cutoff: float, keep: dict[str, set[str]], dry_run: bool) -> tuple[int, int]:
    root = data_dir / EMBEDDINGS_DIR
    tables = sorted(root.glob("embeddings_*.lance")) if root.is_dir() else []
    if not tables:
        return 0, 0
    import lancedb

    db = lancedb.connect(root)
    removed = kept = 0
    for folder in tables:
        name = folder.name.removesuffix(".lance")
        embedder_key = name.removeprefix("embeddings_")
        last_write = max((p.stat().st_mtime for p in folder.rglob("*") if p.is_file()), default=0.0)
        needed = keep.get(embeddings_cache(embedder_key), set())
        # timeout=0: a run embedding with this embedder holds the lock; refuse at once, naming it.
        with content_lock(data_dir, "embedder", embedder_key, timeout=0):
            table = db.open_table(name)
            total = table.count_rows()
            if last_write >= cutoff:
                kept += total
                continue
            keys = table.search().select(["text_sha"]).limit(None).to_arrow()["text_sha"].to_pylist()
            drop = sorted(set(keys) - needed)
            if drop and not dry_run:
                _delete_keys(table, drop, all_rows=len(drop) == len(set(keys)))
            removed += len(drop)
            kept += total - len(drop)
    return removed, kept


def _delete_keys(table, keys: list[str], all_rows: bool) -> None:
    from ragkit.artefacts.index import sql_text

    if all_rows:
        table.delete("true")
        return
    for start in range(0, len(keys), DELETE_BATCH):
        batch = keys[start : start + DELETE_BATCH]
        table.delete(f"text_sha IN ({', '.join(sql_text(key) for key in batch)})")


def folder_keep_set(folder: str | Path) -> dict[str, set[str]]:
    """Every cache key the committed runs of ``folder`` recorded, per cache.

    ConfigError if ``folder`` is not a results folder, if a record cannot be read, or if a run
    committed in it has no record (written before records existed): pruning could then remove
    what it needs."""
    from ragkit.results import ResultStore

    store = ResultStore(folder)
    if not store.exists():
        raise ConfigError(f"--keep-runs {folder}: no results folder there (expected a 'runs' subfolder)")
    keep: dict[str, set[str]] = {}
    recorded: set[str] = set()
    for entry in store.files.list(RECORD_DIR, ".json"):
        try:
            record = json.loads(store.files.read_bytes(f"{RECORD_DIR}/{entry.stem}.json"))
            if record.get("format") != RECORD_FORMAT:
                raise ValueError(f"format {record.get('format')!r}, this version reads {RECORD_FORMAT}")
            recorded.add(str(record["run_id"]))
            for cache, keys in record["keys"].items():
                keep.setdefault(cache, set()).update(keys)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigError(f"--keep-runs {folder}: unreadable cache-key record "
                              f"{RECORD_DIR}/{entry.stem}.json ({error})") from error
    unrecorded = sorted(set(store.completed_questions()) - recorded)
    if unrecorded:
        raise ConfigError(f"--keep-runs {folder}: {len(unrecorded)} run(s) (e.g. {unrecorded[0]}) were committed "
                          f"before cache keys were recorded, so what they need is unknown; leave the folder "
                          f"out (or prune by age alone)")
    return keep


def keep_set(folders: Iterable[str | Path]) -> dict[str, set[str]]:
    """The union of the keep-sets of ``folders``."""
    keep: dict[str, set[str]] = {}
    for folder in folders:
        for cache, keys in folder_keep_set(folder).items():
            keep.setdefault(cache, set()).update(keys)
    return keep
