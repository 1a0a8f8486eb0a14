"""A persistent FIFO job queue stored in one SQLite file."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from tinyqueue.retry import next_delay


@dataclass
class Job:
    """One unit of work: its id, payload and how many times it was taken."""

    job_id: int
    payload: dict
    attempts: int


class Queue:
    """A job queue; every method is safe to call from several processes."""

    def __init__(self, path: str, visibility_timeout: float = 30.0, max_attempts: int = 5,
                 busy_timeout: float = 5.0) -> None:
        self.path = path
        self.visibility_timeout = visibility_timeout
        self.max_attempts = max_attempts
        self._db = sqlite3.connect(path, timeout=busy_timeout)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, payload TEXT, priority INTEGER, "
            "attempts INTEGER DEFAULT 0, visible_at REAL DEFAULT 0)"
        )

    def put(self, payload: dict, priority: int = 5) -> int:
        """Add a job and return its id; higher priorities are served first."""
        if not 0 <= priority <= 9:
            raise ValueError(f"priority must be between 0 and 9, got {priority}")
        cursor = self._db.execute("INSERT INTO jobs (payload, priority) VALUES (?, ?)",
                                  (json.dumps(payload), priority))
        self._db.commit()
        return int(cursor.lastrowid or 0)

    def get(self) -> Job | None:
        """Take the next visible job, or None when there is none."""
        now = time.time()
        row = self._db.execute(
            "SELECT id, payload, attempts FROM jobs WHERE visible_at <= ? ORDER BY priority DESC, id LIMIT 1",
            (now,),
        ).fetchone()
        if row is None:
            return None
        self._db.execute("UPDATE jobs SET attempts = attempts + 1, visible_at = ? WHERE id = ?",
                         (now + self.visibility_timeout, row[0]))
        self._db.commit()
        return Job(row[0], json.loads(row[1]), row[2] + 1)

    def ack(self, job_id: int) -> None:
        """Mark a job done: it is deleted at once."""
        self._db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        self._db.commit()

    def fail(self, job: Job) -> None:
        """Put a failed job back after its retry delay."""
        delay = next_delay(job.attempts)
        self._db.execute("UPDATE jobs SET visible_at = ? WHERE id = ?", (time.time() + delay, job.job_id))
        self._db.commit()
