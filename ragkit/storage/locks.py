"""Locks per content key, so processes sharing a data directory build each artefact once.

Every lock is a ``filelock.FileLock``: an OS lock (``flock``) the kernel releases when its holder
dies, so a killed run never leaves a lock behind. Content locks live under
``DATA/locks/<kind>/<key>.lock``; a results folder's lock is ``<folder>/.lock``. The holder
writes who it is beside the lock (``.owner``), so a process that gives up waiting says which
process it waited for.

What each lock guards, and the one order they are taken in (never the reverse, so two processes
cannot wait for each other): results folder -> index -> chunk set -> embedder -> model. A corpus
lock is taken alone.

| kind | key | held while |
|---|---|---|
| results folder | the folder | a whole run; a second writer is refused at once |
| ``index`` | index_id | checking the ``.ready`` marker, embedding, building, publishing |
| ``chunkset`` | chunkset_id | checking for the Parquet file, chunking, writing it |
| ``embedder`` | embedder key | looking up, computing and appending missing vectors |
| ``corpus`` | corpus name | reading, merging and writing the corpus manifest |
| ``model`` | export key | exporting a model file (``minilm-onnx``) and publishing it |
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ragkit.errors import LockTimeout

# How long a process waits for another to finish building what it needs. Embedding a large
# corpus on a CPU takes hours; a lock is never stale (its holder's death releases it), so this
# only bounds a wait on a process that is alive but stuck.
BUILD_WAIT_S = 6 * 3600.0

LOCK_KINDS = ("index", "chunkset", "embedder", "corpus", "model")


def content_lock(data_dir: Path, kind: str, key: str, timeout: float = BUILD_WAIT_S):
    """A context manager holding the lock of one content key under ``DATA/locks/``."""
    if kind not in LOCK_KINDS:
        raise ValueError(f"unknown lock kind {kind!r}. Valid kinds: {', '.join(LOCK_KINDS)}")
    return hold(Path(data_dir) / "locks" / kind / f"{key}.lock", f"{kind} {key}", timeout)


@contextmanager
def hold(lock_path: Path, what: str, timeout: float, advice: str = "") -> Iterator[None]:
    """Hold ``lock_path`` for the ``with`` block, waiting up to ``timeout`` seconds (0: fail at
    once) and then raising LockTimeout naming ``what`` and the holder, followed by ``advice``."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_path, timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        waited = f" (waited {timeout:g} s)" if timeout > 0 else ""
        raise LockTimeout(f"{what} is in use by {_holder(lock_path)}{waited}"
                          + (f"; {advice}" if advice else "")) from None
    owner = _owner_path(lock_path)
    try:
        # Not atomic and not fsynced: it only informs a waiter's message, and a reader tolerates a half one.
        owner.write_text(json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv), "since": time.time()}))
        yield
    finally:
        # Removed while still held, so it never describes a later holder.
        owner.unlink(missing_ok=True)
        lock.release()


def _owner_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".owner")


def _holder(lock_path: Path) -> str:
    try:
        owner = json.loads(_owner_path(lock_path).read_text())
    except (OSError, ValueError):
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(owner["since"]))
    command = owner["command"].strip()
    return f"process {owner['pid']} ({command}, since {since})" if command else f"process {owner['pid']}"
