"""What the benchmark scripts share: the ratio table they print, percentiles, and the peak RSS
of a child process. Not a benchmark itself; the scripts beside it import it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
# Below this, this process's peak is an interpreter with its imports: a floor under every memory
# goal measured here (the smallest is 500 MB), so a child's number is not checked against it.
FLOOR_CHECK_MB = 256
# A floored child reads this process's peak plus what starting it touched (0.1 MB measured here).
FLOOR_MARGIN_MB = 16


@dataclass
class Measurement:
    """One line of a ratio table: a value of ragkit's against a baseline measured in the same run.

    ``passed`` is None for a line that has no goal (shown for context)."""

    name: str
    measured: float
    baseline: float
    unit: str
    goal: str
    passed: bool | None

    @property
    def ratio(self) -> float:
        return self.measured / self.baseline if self.baseline else float("nan")


def print_table(rows: list[Measurement], baseline_name: str = "baseline") -> None:
    print()
    print(f"{'measurement':44} {'measured':>14} {baseline_name:>14} {'ratio':>8}  {'goal':18} result")
    for row in rows:
        verdict = "-" if row.passed is None else ("PASS" if row.passed else "MISS")
        print(f"{row.name:44} {row.measured:>10.4g} {row.unit:3} {row.baseline:>10.4g} {row.unit:3} "
              f"{row.ratio:>7.3g}x  {row.goal:18} {verdict}")


def percentile_ms(seconds: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000.0, q))


def run_child(args: list[str], env: dict[str, str] | None = None) -> tuple[str, float]:
    """Run ``python args...`` from the repository root; its stdout and its own peak RSS in MB.

    ``os.wait4`` gives the child's own rusage (``ru_maxrss``, KB on Linux), so several children
    measured in one process do not mix, as RUSAGE_CHILDREN's maximum over all of them would.
    Linux starts a child's ``ru_maxrss`` at this process's own peak (the peak of the memory the
    child was forked from is kept across ``exec``, plus the few pages the start touches): call
    this while this process is small. A child whose peak is within FLOOR_MARGIN_MB of this
    process's, when this process has grown past FLOOR_CHECK_MB, is refused: its number may be ours."""
    import resource

    own_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    process = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, env=child_env, stdout=subprocess.PIPE)
    assert process.stdout is not None
    output = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"child {args} exited with {process.returncode}")
    if usage.ru_maxrss <= own_kb + FLOOR_MARGIN_MB * 1024 and own_kb > FLOOR_CHECK_MB * 1024:
        raise RuntimeError(f"child {args} peaked at {usage.ru_maxrss / 1024:.0f} MB, not above this process's own "
                           f"peak ({own_kb / 1024:.0f} MB), which Linux reports as a forked child's floor: measure "
                           "children before this process grows")
    return output, usage.ru_maxrss / 1024.0
