"""`ragkit run` in a child process that holds still after a given number of committed shards, so a
test kills it at a known point instead of hoping a sleep lands between two commits.

The child wraps ``ResultStore.commit_shard``: the first ``commits`` calls commit as usual; the next
one writes a file saying so and then waits forever, holding the lock every further commit needs.
Killed there, the folder holds exactly ``commits`` committed shards and the run was unfinished,
however fast or loaded the machine is.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

_CHILD = """
import sys, threading, pathlib
from ragkit.results import ResultStore
from ragkit.cli import main

limit, held = int(sys.argv[1]), pathlib.Path(sys.argv[2])
commit = ResultStore.commit_shard
lock = threading.Lock()
done = [0]

def commit_or_hold(self, *args, **kwargs):
    with lock:
        if done[0] >= limit:
            held.write_text(str(done[0]))
            threading.Event().wait()
        commit(self, *args, **kwargs)
        done[0] += 1

ResultStore.commit_shard = commit_or_hold
sys.exit(main(sys.argv[3:]))
"""
# Only a guard against a child that never gets there; the kill itself waits for the file.
HOLD_TIMEOUT_S = 600


def start_held_run(argv: list[str], commits: int, held: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``ragkit`` with ``argv`` in its own process group, holding after ``commits`` commits."""
    command = [sys.executable, "-c", _CHILD, str(commits), str(held), *argv]
    return subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def wait_until_held(process: subprocess.Popen[bytes], held: Path) -> None:
    """Return once the child holds; fail if it ended first (the run had fewer shards than asked)."""
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    while not held.exists():
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            raise AssertionError(f"the run ended (exit {process.returncode}) before holding: {stderr[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the run did not reach its hold within {HOLD_TIMEOUT_S} s")
        time.sleep(0.05)
