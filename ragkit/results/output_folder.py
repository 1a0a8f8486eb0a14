"""Where ``ragkit run --out`` may write: a new or empty folder, or a ragkit results folder (which
it resumes). A folder of other files is refused, naming what is in it, unless ``--force``: the
results would otherwise land among unrelated files without a word."""

from __future__ import annotations

from pathlib import Path

from ragkit.caches.keys import RECORD_DIR as CACHE_RECORDS
from ragkit.errors import ConfigError
from ragkit.results.schema import COMMITS, DAMAGED, MERGED, TABLES
from ragkit.storage.folders import open_folder

# A results folder has its runs or commit markers; a run stopped before its first file may have
# left only its lock (and the lock's owner file).
LAYOUT_MARKS = ("runs", COMMITS)
RESULTS_NAMES = frozenset({*TABLES, COMMITS, MERGED, DAMAGED, CACHE_RECORDS, ".lock", ".lock.owner"})
NAMES_SHOWN = 5
NAME_CHARS = 60


def check_output_folder(location: str | Path, force: bool = False) -> None:
    """Raise ConfigError when ``location`` holds anything but a ragkit results folder, unless
    ``force``. A location that does not exist yet is fine."""
    if force:
        return
    names = open_folder(location).names()
    if not names or any(mark in names for mark in LAYOUT_MARKS) or set(names) <= RESULTS_NAMES:
        return
    shown = ", ".join(_short(name) for name in names[:NAMES_SHOWN])
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    count = f"{len(names)} {'entry' if len(names) == 1 else 'entries'}"
    raise ConfigError(f"--out {location} is not empty and is not a ragkit results folder: it holds {shown}{more} "
                      f"({count}); give a new or empty folder, or add --force to write there anyway")


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 3] + "..."
