"""Re-running a finished experiment from the command line, against its cold first run (issue 32 #6).

    python benchmarks/bench_rerun.py [experiments/quickstart.yaml] [--tries 3] [--compare-with /work/main]
        [--set dataset.limit=1 ...]

In a fresh temporary data directory (so the first run is cold: ingest, chunk, embed, index,
answer), ``ragkit run CONFIG --out DIR`` runs in a child process; then the same command again on
the finished folder, ``--tries`` times (the fastest counts: the machine is shared). Goal: the
re-run under 2 s and at most 0.05x of the cold run (20x). The library call alone
(``run_experiment`` on the finished folder, in this process, after the children) is shown for
context: the difference is what starting the command costs, nearly all of it imports.

Each child's CPU seconds (user + sys, from ``RUSAGE_CHILDREN``) are printed beside its wall time:
on a shared machine they are the steadier number. ``--compare-with DIR`` re-runs the same finished
folder with another checkout's code (``PYTHONPATH=DIR``), interleaved with this one's, for a ratio
measured under the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO_ROOT, Measurement, print_table

GOAL_SECONDS = 2.0
GOAL_RATIO = 0.05


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_cli(config: Path, out: Path, env: dict[str, str], overrides: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``ragkit run CONFIG --out OUT`` in a child interpreter, and its output."""
    started, cpu = time.perf_counter(), children_cpu()
    sets = [arg for override in overrides for arg in ("--set", override)]
    command = [sys.executable, "-m", "ragkit.cli", "run", str(config), "--out", str(out), "--quiet", *sets]
    # From the measured checkout: `python -m` puts the working directory before PYTHONPATH.
    child = subprocess.run(command, cwd=env["PYTHONPATH"], env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, children_cpu() - cpu, child.stdout


def timed_reruns(config: Path, out: Path, env: dict[str, str], overrides: list[str]) -> tuple[float, float]:
    """One re-run of the finished folder: its wall and CPU seconds (it must compute nothing)."""
    seconds, cpu, output = timed_cli(config, out, env, overrides)
    if "nothing new to compute" not in output:
        raise SystemExit(f"the re-run computed something; its output:\n{output}")
    print(f"  re-run ({env['PYTHONPATH']}): {seconds:.2f} s wall, {cpu:.2f} s CPU, "
          f"load {os.getloadavg()[0]:.1f}")
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/quickstart.yaml")
    parser.add_argument("--tries", type=int, default=3, help="re-runs timed; the fastest counts (default 3)")
    parser.add_argument("--compare-with", type=Path, default=None,
                        help="another checkout (e.g. /work/main) whose re-runs are interleaved with this one's")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every run, as `ragkit run --set` (e.g. dataset.limit=1 to "
                        "keep the cold run of a judges config short)")
    args = parser.parse_args()
    config = Path(args.config).resolve()
    print(f"load average before: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as data_dir:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": data_dir}
        out = Path(data_dir) / "results"
        cold, cold_cpu, _ = timed_cli(config, out, env, args.overrides)
        print(f"cold run: {cold:.1f} s wall, {cold_cpu:.1f} s CPU")
        other_env = {**env, "PYTHONPATH": str(args.compare_with.resolve())} if args.compare_with else None
        reruns, others = [], []
        for _ in range(args.tries):
            reruns.append(timed_reruns(config, out, env, args.overrides))
            if other_env is not None:
                others.append(timed_reruns(config, out, other_env, args.overrides))

        os.environ["RAGKIT_DATA_DIR"] = data_dir
        from ragkit.experiments.config import load_config
        from ragkit.experiments.runner import run_experiment

        started = time.perf_counter()
        report = run_experiment(load_config(config, args.overrides), out)
        library = time.perf_counter() - started
        assert report.nothing_to_do
    best, best_cpu = min(wall for wall, _ in reruns), min(cpu for _, cpu in reruns)
    rows = [
        Measurement("CLI re-run of the finished grid vs cold run", best, cold, "s", "<= 0.05x, < 2 s",
                    best / cold <= GOAL_RATIO and best < GOAL_SECONDS),
        Measurement("same, CPU seconds", best_cpu, cold_cpu, "s", "-", None),
        Measurement("library re-run (run_experiment) vs cold run", library, cold, "s", "-", None),
    ]
    if others:
        rows.append(Measurement("CLI re-run, CPU, this code vs --compare-with", best_cpu,
                                min(cpu for _, cpu in others), "s", "-", None))
    print_table(rows, baseline_name="baseline")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
