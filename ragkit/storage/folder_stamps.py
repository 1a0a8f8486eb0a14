"""Cheap stamps that change whenever a folder's files change: the cache keys that let a long-lived
process (the dashboard) reuse what it read until the folder on disk or on object storage moves on.

A stamp is compared, never interpreted: any value that differs after an added, replaced or
removed file will do, and the cheaper it is to take, the more often a page can take it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ragkit.storage import folders

# A folder whose modification time is older than this can no longer change without changing it.
QUIET_FOLDER_S = 2.0
# Stamps of quiet folders, by path: (modification time, stamp). Shared by every caller in the process.
_QUIET_STAMPS: dict[str, tuple] = {}


def folder_stamp(folder: Path) -> float:
    """Changes whenever a file is added, replaced or removed in ``folder``: every file's time."""
    if not folder.exists():
        return 0.0
    return sum(p.stat().st_mtime for p in folder.iterdir()) + len(list(folder.iterdir()))


def entries_stamp(folder: Path) -> tuple:
    """Changes whenever a file is added, replaced or removed directly in ``folder``. Results files
    are written by a rename into their folder (ragkit.storage.atomic), which sets the folder's modification
    time; but the time advances in clock ticks, so two writes within one tick leave it unchanged:
    the stamp also holds every file's time (``folder_stamp``). Listing a thousand runs took 0.3 s
    per page, so a folder quiet for QUIET_FOLDER_S (no write can share its time any more) is listed
    once and then stamped by one stat. The stamp depends on the folder's state only, never on when
    it is asked: sessions asking at once share one cache key, so a view is computed once."""
    try:
        changed = folder.stat().st_mtime_ns
    except FileNotFoundError:
        return (0,)
    known = _QUIET_STAMPS.get(str(folder))
    if known is not None and known[0] == changed:
        return known
    stamp = (changed, folder_stamp(folder))
    if time.time() - changed / 1e9 > QUIET_FOLDER_S:
        _QUIET_STAMPS[str(folder)] = stamp
    return stamp


def local_results_stamp(folder: Path) -> tuple:
    """A local results folder's stamp: its commit markers and its runs table."""
    return entries_stamp(folder / "_commits") + entries_stamp(folder / "runs")


def remote_results_stamp(location: str) -> tuple[Any, ...]:
    """A results folder on object storage: its server and every marker's and run's content tag
    (two LIST requests, so a caller reuses it for a few seconds)."""
    return s3_endpoint(), folders.folder_state(location, "_commits", "runs")


def s3_endpoint() -> str | None:
    """The object storage server in use: a cache key part, as the same s3:// location on another
    server is other data."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
