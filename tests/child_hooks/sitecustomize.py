"""Hooks for `ragkit` child processes started by tests, loaded at interpreter start-up (Python
imports ``sitecustomize`` when it is on the path; the tests put this folder on PYTHONPATH, see
``child_env``). Each acts only when its variable is set, so a test sees what it would otherwise
have to guess from a sleep:

- ``RAGKIT_TEST_LOCK_LOG``: every lock the process had to wait for (another process held it) is
  appended to that file as "<pid> waits <kind>/<lock file>" (tests/storage/test_concurrency.py).
- ``RAGKIT_TEST_HOLD_AFTER`` = "N:FILE": the first N calls of ``ResultStore.commit_shard`` commit;
  the next one writes FILE and waits forever, holding the lock every further commit needs, so a
  test kills or cancels the run at a known point: exactly N shards committed, the run unfinished.
"""

from __future__ import annotations

import os
from typing import Any

_LOCK_LOG = os.environ.get("RAGKIT_TEST_LOCK_LOG")
_HOLD_AFTER = os.environ.get("RAGKIT_TEST_HOLD_AFTER")

if _LOCK_LOG:
    import filelock

    import ragkit.storage.locks

    class _TracedLock(filelock.FileLock):
        def acquire(self, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().acquire(timeout=0)
            except filelock.Timeout:
                name = os.path.join(os.path.basename(os.path.dirname(self.lock_file)), os.path.basename(self.lock_file))
                with open(_LOCK_LOG, "a", encoding="utf-8") as log:  # one short append: whole lines, in order
                    log.write(f"{os.getpid()} waits {name}\n")
                return super().acquire(timeout, *args, **kwargs)

    ragkit.storage.locks.FileLock = _TracedLock  # type: ignore[misc]

if _HOLD_AFTER:
    import threading
    from pathlib import Path

    from ragkit.results import ResultStore

    _limit, _held = int(_HOLD_AFTER.split(":", 1)[0]), Path(_HOLD_AFTER.split(":", 1)[1])
    _commit = ResultStore.commit_shard
    _lock = threading.Lock()
    _done = [0]

    def _commit_or_hold(self: ResultStore, *args: Any, **kwargs: Any) -> None:
        with _lock:
            if _done[0] >= _limit:
                _held.write_text(str(_done[0]))
                threading.Event().wait()
            _commit(self, *args, **kwargs)
            _done[0] += 1

    ResultStore.commit_shard = _commit_or_hold  # type: ignore[method-assign]
