"""`ragkit run` in a child process that holds still after a given number of committed shards, so a
test kills or cancels it at a known point instead of hoping a sleep lands between two commits.

The hook itself is in tests/child_hooks/sitecustomize.py (``RAGKIT_TEST_HOLD_AFTER``): killed or
cancelled once it holds, the folder has exactly that many committed shards and the run was
unfinished, however fast or loaded the machine is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CHILD_HOOKS = Path(__file__).resolve().parent / "child_hooks"
# Only a guard against a child that never gets there; the kill itself waits for the file.
HOLD_TIMEOUT_S = 600


def child_env(base: dict[str, str] | None = None, **variables: str) -> dict[str, str]:
    """``base`` (default: this process's environment) with the child hooks on PYTHONPATH and
    ``variables`` set (RAGKIT_TEST_HOLD_AFTER, RAGKIT_TEST_LOCK_LOG)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHILD_HOOKS), env.get("PYTHONPATH")]))
    return {**env, **variables}


def hold_after(commits: int, held: Path) -> str:
    """The RAGKIT_TEST_HOLD_AFTER value: hold after ``commits`` commits, saying so in ``held``."""
    return f"{commits}:{held}"


def start_held_run(argv: list[str], commits: int, held: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``ragkit`` with ``argv`` in its own process group, holding after ``commits`` commits."""
    return subprocess.Popen([sys.executable, "-m", "ragkit.cli", *argv], start_new_session=True,
                            env=child_env(env, RAGKIT_TEST_HOLD_AFTER=hold_after(commits, held)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_until_held(held: Path, alive, describe=lambda: "") -> None:
    """Return once the child holds; fail if it ended first (the run had fewer shards than asked)."""
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    while not held.exists():
        assert alive(), f"the run ended before holding: {describe()}"
        assert time.monotonic() < deadline, f"the run did not reach its hold within {HOLD_TIMEOUT_S} s"
        time.sleep(0.05)


def process_alive(process: subprocess.Popen[bytes]):
    return lambda: process.poll() is None


def process_stderr(process: subprocess.Popen[bytes]):
    return lambda: (process.stderr.read().decode() if process.stderr else "")[-2000:]
