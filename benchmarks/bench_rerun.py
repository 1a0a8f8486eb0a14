"""Re-running a finished experiment from the command line, against its cold first run (issue 32 #6).

    python benchmarks/bench_rerun.py [experiments/quickstart.yaml] [--tries 3]

In a fresh temporary data directory (so the first run is cold: ingest, chunk, embed, index,
answer), ``ragkit run CONFIG --out DIR`` runs in a child process; then the same command again on
the finished folder, ``--tries`` times (the fastest counts: the machine is shared). Goal: the
re-run under 2 s and at most 0.05x of the cold run (20x). The library call alone
(``run_experiment`` on the finished folder, in this process, after the children) is shown for
context: the difference is what starting the command costs, nearly all of it imports.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO_ROOT, Measurement, print_table

GOAL_SECONDS = 2.0
GOAL_RATIO = 0.05


def timed_cli(config: Path, out: Path, env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of ``ragkit run CONFIG --out OUT`` in a child interpreter, and its output."""
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-m", "ragkit.cli", "run", str(config), "--out", str(out), "--quiet"],
                           cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, child.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/quickstart.yaml")
    parser.add_argument("--tries", type=int, default=3, help="re-runs timed; the fastest counts (default 3)")
    args = parser.parse_args()
    config = Path(args.config).resolve()
    print(f"load average before: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as data_dir:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": data_dir}
        out = Path(data_dir) / "results"
        cold, _ = timed_cli(config, out, env)
        print(f"cold run: {cold:.1f} s")
        reruns = []
        for _ in range(args.tries):
            seconds, output = timed_cli(config, out, env)
            if "nothing new to compute" not in output:
                raise SystemExit(f"the re-run computed something; its output:\n{output}")
            reruns.append(seconds)
        print("re-runs: " + ", ".join(f"{seconds:.2f} s" for seconds in reruns))

        os.environ["RAGKIT_DATA_DIR"] = data_dir
        from ragkit.experiments.config import load_config
        from ragkit.experiments.runner import run_experiment

        started = time.perf_counter()
        report = run_experiment(load_config(config), out)
        library = time.perf_counter() - started
        assert report.nothing_to_do
    best = min(reruns)
    print_table([
        Measurement("CLI re-run of the finished grid vs cold run", best, cold, "s", "<= 0.05x, < 2 s",
                    best / cold <= GOAL_RATIO and best < GOAL_SECONDS),
        Measurement("library re-run (run_experiment) vs cold run", library, cold, "s", "-", None),
    ], baseline_name="cold run")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
