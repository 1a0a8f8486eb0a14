"""Re-running a finished experiment: time against the first run, measured in the same process.

    python benchmarks/bench_rerun.py [experiments/quickstart.yaml]

Prints both timings, the ratio (goal: under 0.10) and how many chunks each run embedded
(goal for the re-run: 0). Uses a fresh temporary data directory, so the first run is cold.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    config_path = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments/quickstart.yaml")
    with tempfile.TemporaryDirectory() as data_dir:
        os.environ["RAGKIT_DATA_DIR"] = data_dir
        from ragkit.experiments.config import load_config
        from ragkit.experiments.runner import run_experiment

        config = load_config(config_path)
        out = Path(data_dir) / "results"
        timings = []
        for attempt in ("first", "re-run"):
            started = time.perf_counter()
            report = run_experiment(config, out)
            timings.append(time.perf_counter() - started)
            print(f"{attempt:7}: {timings[-1]:7.2f} s, questions computed {report.questions_computed}, "
                  f"chunks embedded {report.chunks_embedded}")
        print(f"ratio re-run / first: {timings[1] / timings[0]:.3f} (goal < 0.10)")


if __name__ == "__main__":
    main()
