"""A chunk set of several windows is embedded by several Ray workers at once (one ``embed`` step
per window) and makes, byte for byte, the index an in-process streamed build makes: the same
vectors (each window in the same batches), the same scores, the same count of chunks embedded."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare
from ragkit.results import ResultStore
from ragkit.settings import get_settings

ray = pytest.importorskip("ray", reason="the test extra installs ray; without it the Ray executor cannot be tested")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two MiniLM builds of the sample: ~1-2 min on 2 loaded cores

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
WINDOW_ROWS = 64


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module, as the README runs it: loopback, 2 CPUs, no auth. Its workers
    inherit this environment when it starts: the window size is set before."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")
        env.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(WINDOW_ROWS))
        temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        ray.init(num_cpus=2, _node_ip_address="127.0.0.1", _temp_dir=temp_dir, include_dashboard=False,
                 log_to_driver=False)
        yield ray
        ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def sample_config() -> object:
    return config_from_dict({
        "name": "ray-windows", "dataset": {"path": str(SAMPLE_DATASET), "format": "beir", "limit": 20},
        "chunkers": [{"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}],
        "retrievers": ["dense"], "top_k": [5], "shard_size": 10,
    })


def index_tables(data_dir: Path) -> dict[str, object]:
    import lancedb

    derived = next((data_dir / "derived").iterdir())
    db = lancedb.connect(derived / "lancedb")
    return {marker.name.removesuffix(".ready"): db.open_table(marker.name.removesuffix(".ready")).to_arrow()
            for marker in sorted((derived / "lancedb").glob("chunks_*.ready"))}


def scores(out: Path) -> pd.DataFrame:
    columns = ["run_id", "question_id", "metric", "value", "error"]
    return ResultStore(out).read("scores")[columns].sort_values(columns).reset_index(drop=True).astype(str)


def test_windows_embedded_by_several_workers_make_the_in_process_index(tmp_path, monkeypatch, local_ray):
    from ragkit.experiments.ray_executor import RayExecutor
    from ragkit.experiments.runner import run_experiment

    monkeypatch.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(WINDOW_ROWS))
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "ray-data"))
    get_settings.cache_clear()
    plan, derived_dir = prepare(sample_config())
    executor = RayExecutor(derived_dir, ResultStore(tmp_path / "ray"))
    on_ray = executor.execute(plan)
    assert not on_ray.errors, on_ray.errors

    windows = [w for worker in executor.worker_stats for w in worker["windows"]]
    [index_id] = {index_id for index_id, _ in windows}
    assert sorted(number for _, number in windows) == list(range(len(windows)))  # each window once...
    assert len(windows) >= 3
    assert sum(1 for worker in executor.worker_stats if worker["windows"]) == 2  # ...by both workers

    # In-process with the thread count of a Ray worker (Ray runs each actor with OMP_NUM_THREADS=1):
    # a model's float sums on another thread count may differ in the last bits.
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "local-data"))
    get_settings.cache_clear()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = run_experiment(sample_config(), tmp_path / "local")
    finally:
        torch.set_num_threads(threads)
    assert not local.errors, local.errors

    assert on_ray.chunks_embedded == local.chunks_embedded > 2 * WINDOW_ROWS
    ray_tables, local_tables = index_tables(tmp_path / "ray-data"), index_tables(tmp_path / "local-data")
    assert ray_tables.keys() == local_tables.keys() and f"chunks_{index_id}" in ray_tables
    for name, table in local_tables.items():
        assert ray_tables[name].equals(table), name  # vectors byte-equal, rows in the same order
    pd.testing.assert_frame_equal(scores(tmp_path / "ray"), scores(tmp_path / "local"))
