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
import shutil
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


def embedding_seconds(data_dir: Path) -> float:
    """The seconds the run's index builds spent embedding (model load included), from their step
    records: the part of an in-process run that already keeps every core busy (torch's threads),
    so that Ray workers cannot make it faster on the same machine."""
    total = 0.0
    for record in data_dir.glob("derived/*/steps/*.json"):
        value = json.loads(record.read_text()).get("embed", 0.0)
        total += value["seconds"] if isinstance(value, dict) else value
    return total


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
        ray_temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        ray.init(num_cpus=args.workers, _node_ip_address="127.0.0.1", include_dashboard=False,
                 _temp_dir=ray_temp, log_to_driver=False)
        startup_s = time.perf_counter() - started
        try:
            ray_s, ray_q = timed_run(data, "ray", workdir)
        finally:
            ray.shutdown()
            shutil.rmtree(ray_temp, ignore_errors=True)
        embed_s = embedding_seconds(workdir / "data-local")
    assert ray_q == local_q, (ray_q, local_q)
    local_rate, ray_rate = local_q / local_s, ray_q / ray_s
    print(f"24 configurations x {local_q // 24} questions, cold; Ray start-up {startup_s:.1f} s")
    # Amdahl: the in-process embedding already runs on every core; at best the rest divides by
    # the number of workers (with no per-worker import, scheduling or commit cost).
    ceiling_s = embed_s + (local_s - embed_s) / args.workers
    print(f"in-process: {local_s:.1f} s, of which embedding {embed_s:.1f} s; the best a {args.workers}-worker "
          f"run can do on {os.cpu_count()} cores is about {ceiling_s:.1f} s ({local_s / ceiling_s:.2f}x)")
    with_startup = ray_q / (ray_s + startup_s)
    print_table([
        Measurement(f"#4 Ray, {args.workers} workers (vs in-process)", ray_rate, local_rate, "q/s", ">= 1.6x",
                    ray_rate / local_rate >= 1.6),
        Measurement("#4 the same, Ray start-up included", with_startup, local_rate, "q/s", "(context)", None),
        Measurement("#4 ceiling: embedding as in-process, the rest / workers", local_q / ceiling_s, local_rate,
                    "q/s", "(context)", None),
    ], baseline_name="in-process")


if __name__ == "__main__":
    main()
