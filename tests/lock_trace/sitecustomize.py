"""Put on PYTHONPATH of a child process by tests/test_concurrency.py: with RAGKIT_TEST_LOCK_LOG set,
every lock the process had to wait for (another process held it) is appended to that file as
"<pid> waits <kind>/<lock file>", so the test sees that two runs really contended instead of
assuming it from a sleep. Python imports ``sitecustomize`` at start-up when it is on the path.
"""

from __future__ import annotations

import os

_LOG = os.environ.get("RAGKIT_TEST_LOCK_LOG")

if _LOG:
    from typing import Any

    import filelock

    import ragkit.locks

    class _TracedLock(filelock.FileLock):
        def acquire(self, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().acquire(timeout=0)
            except filelock.Timeout:
                name = os.path.join(os.path.basename(os.path.dirname(self.lock_file)), os.path.basename(self.lock_file))
                with open(_LOG, "a", encoding="utf-8") as log:  # one short append: whole lines, in order
                    log.write(f"{os.getpid()} waits {name}\n")
                return super().acquire(timeout, *args, **kwargs)

    ragkit.locks.FileLock = _TracedLock  # type: ignore[misc]
