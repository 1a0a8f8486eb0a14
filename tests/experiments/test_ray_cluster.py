"""The Ray executor on a simulated 3-node cluster (``ray.cluster_utils.Cluster``: three raylets
of one CPU each on this machine, joined through ``--address`` as a real cluster is): a shrunk
quickstart writes the scores an in-process run writes, with a worker on every node."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare, run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings

ray = pytest.importorskip("ray", reason="the test extra installs ray; without it the Ray executor cannot be tested")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def shrunk_quickstart() -> dict:
    """experiments/quickstart.yaml with its coarsest chunker (the fewest chunks to embed, twice:
    on the cluster and in-process) and its first 12 questions: 3 retrievers x 2 top_k = 6 runs
    of 4 shards."""
    data = yaml.safe_load((ROOT / "experiments" / "quickstart.yaml").read_text(encoding="utf-8"))
    data["dataset"] = {**data["dataset"], "path": str(ROOT / "datasets" / "covidqa_sample"), "limit": 12}
    data["chunkers"] = [c for c in data["chunkers"] if c["type"] == "recursive"]
    assert len(data["chunkers"]) == 1 and data["retrievers"] == ["bm25", "dense", "hybrid"]
    return {**data, "shard_size": 3}


@pytest.fixture
def three_nodes():
    """A head and two more nodes, one CPU each, on loopback with no dashboard and no auth."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")
        # The cluster is joined by its address only: the machine-wide address file a head writes
        # (/tmp/ray/ray_current_cluster) would have another process's ray.init() join it.
        env.setattr(ray._private.utils, "write_ray_address", lambda *args, **kwargs: None)
        # Joined on loopback like the other Ray tests: Ray would otherwise turn 127.0.0.1 into the
        # machine's own address, which a sandbox may not route (ray.init then waits for ever).
        env.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
        temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's sockets: a short path
        node = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
        cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={**node, "temp_dir": temp_dir})
        try:
            for _ in range(2):
                cluster.add_node(**node)
            cluster.wait_for_nodes()
            yield cluster
        finally:
            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()
            shutil.rmtree(temp_dir, ignore_errors=True)


def scores(out: Path) -> pd.DataFrame:
    columns = ["run_id", "question_id", "metric", "value", "error"]
    frame = ResultStore(out).read("scores")[columns]
    return frame.sort_values(columns[:3]).reset_index(drop=True)


def test_a_shrunk_quickstart_on_three_simulated_nodes_scores_as_in_process(tmp_path, monkeypatch, three_nodes):
    from ragkit.experiments.ray_executor import RayExecutor

    config = config_from_dict(shrunk_quickstart())
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "cluster-data"))  # cold: the nodes build and embed
    get_settings.cache_clear()
    plan, derived_dir = prepare(config)
    executor = RayExecutor(derived_dir, ResultStore(tmp_path / "cluster"), address=three_nodes.address)
    on_cluster = executor.execute(plan)
    assert on_cluster.runs_computed == 6 and on_cluster.questions_computed == 6 * 12 and not on_cluster.errors
    assert on_cluster.chunksets_built == 1 and on_cluster.chunks_embedded > 0
    # One worker per node's CPU, each in its own process on its own node, each given steps.
    assert len({worker["node"] for worker in executor.worker_stats}) == 3
    assert all(worker["steps"] > 0 for worker in executor.worker_stats)
    assert sum(worker["query_batches"] for worker in executor.worker_stats) == 1

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "local-data"))
    get_settings.cache_clear()
    local = run_experiment(config, tmp_path / "local")
    assert local.questions_computed == on_cluster.questions_computed
    # The metrics depend on ranks, not on the last bits of a score (a worker has one CPU thread).
    pd.testing.assert_frame_equal(scores(tmp_path / "cluster"), scores(tmp_path / "local"))
