"""Atomic, durable file writes: a crash or a power loss leaves either the old file or the new one,
never half of one.

A write goes to a temporary file beside the target, which is fsynced, renamed over the target,
and then the folder is fsynced so the rename itself is on disk. Folders this creates are fsynced
into their parents the same way. A whole folder (a LanceDB table built elsewhere) is published
the same way by ``publish_dir``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd


def fsync_dir(folder: Path) -> None:
    """Make the entries of ``folder`` (files created, renamed or removed in it) durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(folder: Path) -> None:
    """``folder`` and its missing parents, each made durable in its parent."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    folder.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        fsync_dir(created.parent)


def _atomic_write(path: Path, write, durable: bool = True) -> None:
    if durable:
        make_dirs(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        if durable:
            _fsync_file(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    _atomic_write(path, lambda tmp: tmp.write_bytes(data))


def write_json_atomic(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    _atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_cache_entry(path: Path, value: Any) -> None:
    """A cache entry: atomic (a kill leaves the old file or the new one) but not fsynced, and
    compact. After a power loss an entry may be empty; a cache reads that as a miss and computes
    it again, so durability would only cost (two fsyncs per entry, every question)."""
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    _atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), durable=False)


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` fills a temporary file that then replaces ``path`` as the writes above do
    (a file written in parts, e.g. a Parquet file row group by row group)."""
    _atomic_write(path, write)


def write_parquet_atomic(path: Path, frame: pd.DataFrame) -> None:
    _atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


def publish_dir(built: Path, path: Path) -> None:
    """Move the folder ``built`` (on the same filesystem) to ``path``, which must not exist, in one
    rename: readers see nothing or all of it. Every file and folder in it is fsynced first."""
    for root, _, files in os.walk(built):
        for name in files:
            _fsync_file(Path(root) / name)
        fsync_dir(Path(root))
    make_dirs(path.parent)
    os.rename(built, path)
    fsync_dir(path.parent)
    fsync_dir(built.parent)
