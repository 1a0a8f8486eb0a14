"""#4: the Ray executor with 2 workers against the in-process executor on a 24-configuration grid.

    python benchmarks/bench_ray.py                  # first 40 questions of the bundled COVID-QA sample
    python benchmarks/bench_ray.py --questions 0    # all of them
    python benchmarks/bench_ray.py --questions 0 --artefacts built   # the question phase alone

The grid: 2 chunkers (token 256/32, sentence 512/64) x 3 retrievers (bm25, dense, hybrid) x
2 top_k (5, 10) x heuristic rerank off/on, no LLM. Each executor runs it cold, in a fresh data
directory and results folder: chunk sets, MiniLM embeddings, indexes, then every question. The
local Ray is started before its clock (its start-up is printed on its own line, and as a second
ratio with it included). Throughput is questions answered per second of wall time; the goal is
Ray >= 1.6x in-process. Both write the same tables (tests/experiments/test_ray_executor.py).
Issue 32's goal for the same grid: Ray's CPU seconds at most 1.05x in-process's (the first row).

The CPU seconds of each side (this process's threads and every descendant's, Ray's included) are
printed too, with two limits that follow from them on this machine's cores: the in-process CPU
spread evenly over the cores (a Ray run that added no work of its own), and Ray's own CPU spread
evenly (what its scheduling could reach).

``--artefacts built`` measures what grows with a grid, its question-runs: before either clock, a
child process runs the same grid with one question (in-process) in each executor's data
directory, so chunk sets, embeddings and indexes exist; neither timed run starts with a model
loaded, and both load MiniLM for their queries. The one warm-up question is the first measured
one too: its retrievals come from the cache on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
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


def cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of its descendants, from /proc: a local
    Ray's GCS, raylet and workers all run under the driver. A descendant that ended is counted in
    its parent's children's times, so a difference of two calls keeps it. (psutil comes only inside
    Ray's vendored copy, which ``import ray`` puts on the path.)"""
    import resource

    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        pid = int(stat.parent.name)
        # ppid; utime + stime + cutime + cstime (its own and its waited-for children's)
        parents[pid], ticks[pid] = int(fields[1]), sum(int(f) for f in fields[11:15])
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    family = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in family and pid not in family:
                family.add(pid)
                total += ticks[pid] / os.sysconf("SC_CLK_TCK")
                grew = True
    return total


def build_artefacts(config_data: dict, executor: str, workdir: Path) -> None:
    """Chunk sets, embeddings and indexes of the grid in ``executor``'s data directory, built by a
    one-question run in a child process (this process loads no model)."""
    warm = {**config_data, "dataset": {**config_data["dataset"], "limit": 1}}
    subprocess.run([sys.executable, __file__, "--child-build", json.dumps(warm), str(workdir), executor],
                   check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def child_build(config_json: str, workdir: str, executor: str) -> None:
    config_data = json.loads(config_json)
    os.environ["RAGKIT_DATA_DIR"] = str(Path(workdir) / f"data-{executor}")
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment

    report = run_experiment(config_from_dict(config_data), Path(workdir) / f"warm-{executor}", executor="local")
    assert not report.errors, report.errors


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
    parser.add_argument("--dataset", type=Path, default=ROOT / "datasets" / "covidqa_sample",
                        help="a SQuAD-format dataset folder (default: the bundled sample; a larger one shows "
                             "the workers' fixed cost, their imports and model loads, spread over more work)")
    parser.add_argument("--artefacts", choices=["cold", "built"], default="cold",
                        help="cold: each executor builds chunk sets and indexes in its clock; built: they exist")
    parser.add_argument("--child-build", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child_build:
        child_build(*args.child_build)
        return
    os.environ["RAY_AUTH_MODE"] = "disabled"
    data = grid(args.dataset, args.questions or None)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "grid.json").write_text(json.dumps(data))
        if args.artefacts == "built":
            for executor in ("local", "ray"):
                build_artefacts(data, executor, workdir)
        cpu_before = cpu_seconds()
        local_s, local_q = timed_run(data, "local", workdir)
        local_cpu = cpu_seconds() - cpu_before

        import ray

        started = time.perf_counter()
        ray_temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        ray.init(num_cpus=args.workers, _node_ip_address="127.0.0.1", include_dashboard=False,
                 _temp_dir=ray_temp, log_to_driver=False)
        startup_s = time.perf_counter() - started
        try:
            cpu_before = cpu_seconds()
            ray_s, ray_q = timed_run(data, "ray", workdir)
            ray_cpu = cpu_seconds() - cpu_before  # read before shutdown ends the workers
        finally:
            ray.shutdown()
            shutil.rmtree(ray_temp, ignore_errors=True)
        embed_s = embedding_seconds(workdir / "data-local")  # with built artefacts, the warm-up's
    assert ray_q == local_q, (ray_q, local_q)
    local_rate, ray_rate = local_q / local_s, ray_q / ray_s
    state = "cold" if args.artefacts == "cold" else "artefacts built"
    cores = os.cpu_count() or 1
    print(f"24 configurations x {local_q // 24} questions, {state}; Ray start-up {startup_s:.1f} s")
    # No run takes less wall time than its CPU seconds over the cores: in-process already keeps
    # more than one core busy (torch's and LanceDB's own threads; the index builds' embedding above
    # all), so even a Ray run adding no CPU of its own is bounded by the in-process CPU / cores.
    embedding = f", of which embedding {embed_s:.1f} s (torch on every core)" if args.artefacts == "cold" else ""
    print(f"in-process: {local_s:.1f} s{embedding}; CPU {local_cpu:.1f} s, {local_cpu / local_s:.2f} of {cores} "
          f"cores busy on average")
    print(f"Ray: {ray_s:.1f} s; CPU {ray_cpu:.1f} s (driver, Ray's own processes, workers), "
          f"{ray_cpu / ray_s:.2f} of {cores} cores busy on average")
    with_startup = ray_q / (ray_s + startup_s)
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print_table([
        # Issue 32 #4: what Ray adds, in CPU seconds (wall time on a shared machine says little).
        Measurement(f"#4 Ray's extra CPU, {args.workers} workers (vs in-process), {state}", ray_cpu, local_cpu, "CPU s",
                    "<= 1.05x", ray_cpu <= 1.05 * local_cpu),
        Measurement(f"#4 Ray, {args.workers} workers (vs in-process), {state}", ray_rate, local_rate, "q/s",
                    ">= 1.6x", ray_rate / local_rate >= 1.6),
        Measurement("#4 the same, Ray start-up included", with_startup, local_rate, "q/s", "(context)", None),
        Measurement(f"#4 ceiling: the in-process CPU seconds over {cores} cores", local_q / (local_cpu / cores),
                    local_rate, "q/s", "(context)", None),
        Measurement(f"#4 bound: Ray's own CPU seconds over {cores} cores", ray_q / (ray_cpu / cores), local_rate,
                    "q/s", "(context)", None),
    ], baseline_name="in-process")


if __name__ == "__main__":
    main()
