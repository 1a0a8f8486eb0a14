"""A run's live status as a small JSON file, so another process (the dashboard) can follow it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ragkit.atomic import write_json_atomic

STATES = ("running", "done", "failed")


class StatusWriter:
    """Writes {state, done, total, started, updated, pid, error}; throttled to a few writes a second."""

    def __init__(self, path: Path, total: int, min_interval: float = 0.5) -> None:
        self.path = path
        self.total = total
        self.done = 0
        self.started = time.time()
        self._min_interval = min_interval
        self._last_write = 0.0
        self._write("running")

    def _write(self, state: str, error: str | None = None, outcome: dict[str, Any] | None = None) -> None:
        self._last_write = time.time()
        write_json_atomic(self.path, {
            "state": state, "done": self.done, "total": self.total, "started": self.started,
            "updated": self._last_write, "pid": os.getpid(), "error": error,
            **({"outcome": outcome} if outcome is not None else {}),
        })

    def advance(self, amount: int) -> None:
        self.done += amount
        if time.time() - self._last_write >= self._min_interval:
            self._write("running")

    def finish(self, error: str | None = None, outcome: dict[str, Any] | None = None) -> None:
        """``outcome``: what the work yielded against what was asked ({summary, poor, advice, ...}),
        shown beside the state ("done · kept 5 of 40: poor yield")."""
        self._write("failed" if error else "done", error, outcome)


def read_status(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
