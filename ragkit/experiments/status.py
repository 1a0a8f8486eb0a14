"""A run's live status as a small JSON file, so another process (the dashboard) can follow it,
and what a person reads of the work between questions: an index build's chunks embedded of its
total, the rate and the time left (``BuildProgress``)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragkit.storage.atomic import write_json_atomic

STATES = ("running", "done", "failed")


class StatusWriter:
    """Writes {state, done, total, unit, started, updated, pid, error, detail}; throttled to a few
    writes a second. ``unit``: what ``done`` and ``total`` count ("questions", "LLM calls");
    ``detail``: what the run is doing besides answering questions (an index build), or None."""

    def __init__(self, path: Path, total: int, min_interval: float = 0.5, unit: str = "questions") -> None:
        self.path = path
        self.total = total
        self.unit = unit
        self.done = 0
        self.detail: str | None = None
        self.started = time.time()
        self._min_interval = min_interval
        self._last_write = 0.0
        self._write("running")

    def _write(self, state: str, error: str | None = None, outcome: dict[str, Any] | None = None) -> None:
        self._last_write = time.time()
        write_json_atomic(self.path, {
            "state": state, "done": self.done, "total": self.total, "unit": self.unit, "started": self.started,
            "updated": self._last_write, "pid": os.getpid(), "error": error, "detail": self.detail,
            **({"outcome": outcome} if outcome is not None else {}),
        })

    def describe(self, detail: str | None) -> None:
        """Say what the run is doing between questions (None: answering them again)."""
        changed = (detail is None) != (self.detail is None)
        self.detail = detail
        if changed or time.time() - self._last_write >= self._min_interval:
            self._write("running")

    def advance(self, amount: int) -> None:
        self.done += amount
        if time.time() - self._last_write >= self._min_interval:
            self._write("running")

    def finish(self, error: str | None = None, outcome: dict[str, Any] | None = None) -> None:
        """``outcome``: what the work yielded against what was asked ({summary, poor, advice, ...}),
        shown beside the state ("done · kept 5 of 40: poor yield")."""
        self.detail = None
        self._write("failed" if error else "done", error, outcome)


def read_status(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


# Progress events of an index build (``execution_report.Progress``): its chunks when it starts, then
# "embedded" as chunks are embedded, then its end.
INDEX_STARTED = "index_started"
INDEX_BUILT = "index_built"
EMBEDDED = "embedded"


def clock_text(seconds: float) -> str:
    """1:50, 1:06:17."""
    seconds = max(round(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class BuildProgress:
    """Follows the executor's build events and says what is being built: "building index 2 of 6:
    1,234 of 6,742 chunks embedded, 45/s, ETA 1:50". The rate is over this index's build so far;
    chunks the embedding cache already holds are not embedded again, so a build can end before
    its count reaches the total. Without an "index_started" event (a Ray worker's embedding) it
    says the chunks embedded and the rate alone."""

    def __init__(self, indexes_to_build: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.indexes_to_build = indexes_to_build
        self.clock = clock
        self.started_indexes = 0
        self.chunks: int | None = None
        self.embedded = 0
        self.since: float | None = None
        self.building = False

    def event(self, event: str, amount: int) -> bool:
        """Take one event; True when it is a build event (the text may have changed)."""
        if event == INDEX_STARTED:
            self.started_indexes += 1
            self.chunks, self.embedded, self.since, self.building = amount, 0, self.clock(), True
        elif event == EMBEDDED:
            if not self.building:  # embedding reported without a start: follow it all the same
                self.chunks, self.embedded, self.since, self.building = None, 0, self.clock(), True
            self.embedded += amount
        elif event == INDEX_BUILT:
            self.building = False
        else:
            return False
        return True

    def text(self) -> str | None:
        """What is being built, or None when nothing is."""
        if not self.building:
            return None
        of = f" of {self.indexes_to_build}" if self.indexes_to_build else ""
        name = f"building index {self.started_indexes}{of}" if self.started_indexes else "embedding"
        elapsed = self.clock() - (self.since or self.clock())
        rate = self.embedded / elapsed if elapsed > 0 and self.embedded else None
        count = f"{self.embedded:,}" + (f" of {self.chunks:,}" if self.chunks is not None else "")
        parts = [f"{name}: {count} chunks embedded"]
        if rate is not None:
            parts.append(f"{rate:,.0f}/s")
            if self.chunks is not None and self.chunks > self.embedded:
                parts.append(f"ETA {clock_text((self.chunks - self.embedded) / rate)}")
        return ", ".join(parts)


def indexes_to_build(plan: Any, derived_dir: Path) -> int:
    """The plan's indexes not built yet (their ready marker missing), for "building index 2 of 6"."""
    from ragkit.artefacts.index import index_marker

    return sum(not index_marker(Path(derived_dir) / "lancedb", step.index_id).exists() for step in plan.index_steps)
