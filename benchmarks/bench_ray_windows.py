"""Issue 32 #4: one index of several windows, its windows embedded by 2 Ray workers at once
(``embed`` steps) against 1 Ray worker (the same steps one after the other) and in-process.

    python benchmarks/bench_ray_windows.py                       # ~700 chunks, windows of 128
    python benchmarks/bench_ray_windows.py --window-rows 256 --chunk-size 32

Each side runs cold in a fresh data directory (chunk set, MiniLM embeddings, the dense index, then
one question), with ``RAGKIT_BUILD_WINDOW_ROWS`` set before the local Ray starts (its workers read
their settings from the environment Ray started with); each local Ray is started before its
clock. Printed per side: wall seconds, CPU seconds of this process and its descendants (Ray's
processes included, from /proc: ``bench_ray.cpu_seconds``), chunks embedded, the load average.
On a shared 2-core machine the wall gain of 2 workers is bounded by what the other helpers leave.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ray import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]


def config_data(chunk_size: int) -> dict:
    return {"name": "bench-ray-windows",
            "dataset": {"path": str(ROOT / "datasets" / "covidqa_sample"), "format": "beir", "limit": 1},
            "chunkers": [{"type": "token", "params": {"chunk_size": chunk_size, "chunk_overlap": chunk_size // 8}}],
            "embedders": ["minilm"], "retrievers": ["dense"], "top_k": [5]}


def measure(side: str, data: dict, workdir: Path) -> dict:
    """One cold run: ``local``, or ``ray1`` / ``ray2`` (a local Ray of that many CPUs)."""
    import ray

    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.settings import get_settings

    os.environ["RAGKIT_DATA_DIR"] = str(workdir / f"data-{side}")
    get_settings.cache_clear()
    temp = None
    if side != "local":
        temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        ray.init(num_cpus=int(side[-1]), _node_ip_address="127.0.0.1", include_dashboard=False,
                 _temp_dir=temp, log_to_driver=False)
    try:
        cpu, started = cpu_seconds(), time.perf_counter()
        report = run_experiment(config_from_dict(data), workdir / f"out-{side}",
                                executor="local" if side == "local" else "ray")
        wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    finally:
        if temp is not None:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)
    assert not report.errors, report.errors
    return {"side": side, "wall": wall, "cpu": cpu, "embedded": report.chunks_embedded,
            "load": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-rows", type=int, default=128)
    parser.add_argument("--chunk-size", type=int, default=64, help="token chunks (overlap: 1/8 of it)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAGKIT_BUILD_WINDOW_ROWS"] = str(args.window_rows)
    data = config_data(args.chunk_size)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(side, data, Path(tmp)) for side in ("local", "ray1", "ray2")]
        [chunkset] = Path(tmp).glob("data-local/derived/*/chunksets/*.parquet")
        chunks = pq.ParquetFile(chunkset).metadata.num_rows
    print(f"{chunks} chunks, windows of {args.window_rows}: {-(-chunks // args.window_rows)} windows")
    for row in rows:
        load = " / ".join(f"{value:.1f}" for value in row["load"])
        print(f"{row['side']:>5}: {row['wall']:6.1f} s wall, {row['cpu']:6.1f} CPU s, "
              f"{row['embedded']} chunks embedded, load average {load}")


if __name__ == "__main__":
    main()
