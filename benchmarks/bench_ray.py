"""#4: the Ray executor with 2 workers against the in-process executor on a 24-configuration grid.

    python benchmarks/bench_ray.py                  # first 40 questions of the bundled COVID-QA sample
    python benchmarks/bench_ray.py --questions 0    # all of them

The grid: 2 chunkers (token 256/32, sentence 512/64) x 3 retrievers (bm25, dense, hybrid) x
2 top_k (5, 10) x heuristic rerank off/on, no LLM. Each executor runs it cold, in a fresh data
directory and results folder: chunk sets, MiniLM embeddings, indexes, then every question. The
local Ray is started before its clock (its start-up is printed on its own line, and as a second
ratio with it included). Throughput is questions answered per second of wall time; the goal is
Ray >= 1.6x in-process. Both write the same tables (tests/experiments/test_ray_executor.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Measurement, print_table

ROOT = Path(__file__).resolve().parents[1]


def grid(dataset: Path, limit: int | None) -> dict:
    return {
        "name": "bench-ray",
        "dataset": {"path": str(dataset), "format": "squad", **({"limit": limit} if limit else {})},
        "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}},
                     {"type": "sentence", "params": {"chunk_size": 512, "chunk_overlap": 64}}],
        "embedders": ["minilm"], "retrievers": ["bm25", "dense", "hybrid"], "top_k": [5, 10],
        "judges": {"rerank": ["off", "heuristic"]},
    }


def timed_run(config_data: dict, executor: str, workdir: Path) -> tuple[float, int]:
    """Wall seconds and questions answered of one cold run in a fresh data directory."""
    os.environ["RAGKIT_DATA_DIR"] = str(workdir / f"data-{executor}")
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.settings import get_settings

    get_settings.cache_clear()
    config = config_from_dict(config_data)
    started = time.perf_counter()
    report = run_experiment(config, workdir / f"out-{executor}", executor=executor)
    return time.perf_counter() - started, report.questions_computed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=40, help="questions of the sample to ask (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    data = grid(ROOT / "datasets" / "covidqa_sample", args.questions or None)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "grid.json").write_text(json.dumps(data))
        local_s, local_q = timed_run(data, "local", workdir)

        import ray

        started = time.perf_counter()
        ray.init(num_cpus=args.workers, _node_ip_address="127.0.0.1", include_dashboard=False,
                 _temp_dir=tempfile.mkdtemp(prefix="ray", dir="/tmp"), log_to_driver=False)
        startup_s = time.perf_counter() - started
        try:
            ray_s, ray_q = timed_run(data, "ray", workdir)
        finally:
            ray.shutdown()
    assert ray_q == local_q, (ray_q, local_q)
    local_rate, ray_rate = local_q / local_s, ray_q / ray_s
    print(f"24 configurations x {local_q // 24} questions, cold; Ray start-up {startup_s:.1f} s")
    with_startup = ray_q / (ray_s + startup_s)
    print_table([
        Measurement(f"#4 Ray, {args.workers} workers (vs in-process)", ray_rate, local_rate, "q/s", ">= 1.6x",
                    ray_rate / local_rate >= 1.6),
        Measurement("#4 the same, Ray start-up included", with_startup, local_rate, "q/s", "(context)", None),
    ], baseline_name="in-process")


if __name__ == "__main__":
    main()
